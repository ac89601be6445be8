// The player page: WebRTC receive-only video + an input data channel, paired by approval.
// Identity: one RTCCertificate generated once and kept in IndexedDB, so the DTLS fingerprint
// the host sees in our offer is the same on every visit (the operator approves it once).
// Low-latency mode (secure contexts only): video comes as access units over a WebSocket (H.264
// or HEVC Annex-B, or AV1 OBUs: the host picks among what this browser's WebCodecs decodes) and
// is decoded onto a canvas; audio and input stay on WebRTC.
"use strict";
(() => {
  const $ = (id) => document.getElementById(id);
  const state = { state: "idle", fingerprint: null, stats: {}, host: {}, pc: null, dc: null,
                  transport: "webrtc", ws: null, decoder: null,
                  wc: { received: 0, bytes: 0, decoded: 0, skipped: 0, catchups: 0, maxQueue: 0 } };
  const lowLatencyOk = window.isSecureContext && "VideoDecoder" in window;
  // What the decoder is configured with per codec: H.264 Constrained Baseline 5.2, HEVC Main
  // 5.1, AV1 Main 5.1 8-bit (what the host's encoders write). No `description`: in band.
  const CODEC_STRINGS = { h264: "avc1.42E034", hevc: "hev1.1.6.L153.B0", av1: "av01.0.13M.08" };
  // The codecs this browser's WebCodecs decodes, asked once (the offer tells the host).
  const decodable = lowLatencyOk ? Promise.all(Object.entries(CODEC_STRINGS).map(([name, codec]) =>
    VideoDecoder.isConfigSupported({ codec, optimizeForLatency: true })
      .then((r) => (r.supported ? name : null), () => null)))
    .then((names) => names.filter(Boolean)) : Promise.resolve(["h264"]);
  $("lowlat").disabled = !lowLatencyOk;
  if (!lowLatencyOk) $("lowlat").parentElement.title += " (not available on this page)";
  window.nativePlayer = state;
  state.pongs = {};
  // Clipboard: off until the host says it shares one (`clip-mode`); counters for the page's line.
  state.clip = { on: false, max: 65536, last: null, sent: 0, received: 0, why: "" };
  // Data-channel echo time in ms (the input path's transport share of latency).
  state.ping = () => new Promise((resolve) => {
    const c = Math.random().toString(36).slice(2), t0 = performance.now();
    state.pongs[c] = () => resolve(performance.now() - t0);
    send({ t: "ping", c });
  });

  function csrf() {
    const m = document.cookie.match(/(?:^|; )csrftoken=([^;]+)/);
    return m ? decodeURIComponent(m[1]) : "";
  }
  function say(text, st) {
    $("status").textContent = text;
    if (st) state.state = st;
  }

  function idb() {
    return new Promise((resolve, reject) => {
      const req = indexedDB.open("native-player", 1);
      req.onupgradeneeded = () => req.result.createObjectStore("keys");
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => reject(req.error);
    });
  }
  async function certificate() {
    const db = await idb();
    const get = (key) => new Promise((res, rej) => {
      const r = db.transaction("keys").objectStore("keys").get(key);
      r.onsuccess = () => res(r.result); r.onerror = () => rej(r.error);
    });
    let cert = await get("cert");
    if (cert && cert.expires > Date.now() + 86400e3) return cert;
    cert = await RTCPeerConnection.generateCertificate(
      { name: "ECDSA", namedCurve: "P-256", expires: 365 * 86400e3 });
    await new Promise((res, rej) => {
      const tx = db.transaction("keys", "readwrite");
      tx.objectStore("keys").put(cert, "cert");
      tx.oncomplete = res; tx.onerror = () => rej(tx.error);
    });
    return cert;
  }

  function gathered(pc) {
    if (pc.iceGatheringState === "complete") return Promise.resolve();
    return new Promise((res) => {
      const done = () => { if (pc.iceGatheringState === "complete") res(); };
      pc.addEventListener("icegatheringstatechange", done);
      setTimeout(res, 3000);  // host candidates come at once; do not hang on a slow interface
    });
  }

  function send(msg) {
    if (state.dc && state.dc.readyState === "open") state.dc.send(JSON.stringify(msg));
  }

  async function start(ev) {
    if (ev) ev.preventDefault();
    const chosen = $("app").selectedOptions[0];
    if (chosen && chosen.dataset.fleetApp) return placeElsewhere(chosen);
    stop("restart");
    state.clip.on = false; $("clip").hidden = true;
    localStorage.setItem("native-name", $("name").value);
    const [w, h] = $("mode").value.split("x").map(Number);
    const fps = Number($("fps").value);
    state.transport = lowLatencyOk && $("lowlat").checked ? "webcodecs" : "webrtc";
    $("canvas").hidden = state.transport !== "webcodecs";
    $("video").hidden = state.transport === "webcodecs";  // still plays the sound
    say("Preparing…", "offering");
    const pc = new RTCPeerConnection({ certificates: [await certificate()] });
    state.pc = pc;
    const tr = pc.addTransceiver("video", { direction: "recvonly" });
    const caps = RTCRtpReceiver.getCapabilities("video").codecs;
    const h264 = caps.filter((c) => c.mimeType === "video/H264"
      && /packetization-mode=1/.test(c.sdpFmtpLine || "") && /profile-level-id=42/.test(c.sdpFmtpLine || ""));
    if (h264.length) tr.setCodecPreferences([...h264, ...caps.filter((c) => c.mimeType === "video/rtx")]);
    const dc = pc.createDataChannel("input", { ordered: true });
    state.dc = dc;
    // A channel we already let go of (Stop, restart) may still deliver the host's "bye": ignore it.
    dc.onmessage = (e) => { if (state.dc === dc) onHost(JSON.parse(e.data)); };
    pc.addTransceiver("audio", { direction: "recvonly" });
    const media = new MediaStream();
    pc.ontrack = (e) => { media.addTrack(e.track); $("video").srcObject = media; };
    if (ev) $("video").muted = false;  // Start was a click: sound may play
    pc.onconnectionstatechange = () => {
      const s = pc.connectionState;
      if (s === "connected") { say(`Playing ${w}x${h}@${fps}.`, "playing"); $("fullscreen").disabled = false; }
      if ((s === "failed" || s === "closed" || s === "disconnected") && state.pc === pc
          && state.state === "playing") {
        say(`Connection ${s}. Reconnecting…`, "reconnecting");
        setTimeout(() => { if (state.pc === pc) start(); }, 2000);
      }
    };
    await pc.setLocalDescription(await pc.createOffer());
    await gathered(pc);
    const body = { sdp: pc.localDescription.sdp, name: $("name").value, app: $("app").value,
                   width: w, height: h, fps, pin: $("pin").value || undefined,
                   transport: state.transport,
                   decodes: state.transport === "webcodecs" ? await decodable : ["h264"] };
    $("stop").disabled = false;
    await knock(pc, body);
  }

  async function knock(pc, body) {
    while (state.pc === pc) {
      let r;
      try {
        r = await fetch("/native/offer", { method: "POST", credentials: "same-origin",
          headers: { "Content-Type": "application/json", "X-CSRFToken": csrf() },
          body: JSON.stringify(body) });
      } catch (e) { say(`Host unreachable: ${e}`, "error"); return; }
      const data = await r.json().catch(() => ({ error: `HTTP ${r.status}` }));
      if (data.fingerprint) state.fingerprint = data.fingerprint;
      if (r.status === 202) {
        say(`Waiting for the operator to approve this device (request ${data.id}).`, "pending");
        await new Promise((res) => setTimeout(res, 1500));
        continue;
      }
      if (!r.ok) { say(`Refused: ${data.error}`, "refused"); pc.close(); return; }
      say("Approved. Connecting…", "connecting");
      await pc.setRemoteDescription({ type: "answer", sdp: data.sdp });
      return;
    }
  }

  // This page's device identity as an offer names it (SHA-256 of the DTLS certificate).
  async function ownFingerprint() {
    const cert = await certificate();
    const listed = cert.getFingerprints ? cert.getFingerprints() : [];
    const fp = listed.find((f) => f.algorithm === "sha-256");
    if (fp) return fp.value;
    const pc = new RTCPeerConnection({ certificates: [cert] });
    pc.createDataChannel("id");
    const offer = await pc.createOffer();
    pc.close();
    const m = offer.sdp.match(/^a=fingerprint:sha-256 ([0-9A-Fa-f:]+)/m);
    return m ? m[1] : "";
  }

  // A title of another host (a fleet member): this host picks the member and vouches for this
  // device there (it must be paired here first: pending, or a PIN, as for an offer); the page
  // then posts the member's one-use ticket to the member (a form POST: never in a URL), which
  // opens its own player with the title chosen.
  async function placeElsewhere(opt) {
    stop("restart");
    localStorage.setItem("native-name", $("name").value);
    const token = {};
    state.placing = token;
    say("Finding a host for this title…", "placing");
    const body = { app: opt.dataset.fleetApp, title: opt.dataset.fleetTitle,
                   name: $("name").value, fingerprint: await ownFingerprint(),
                   pin: $("pin").value || undefined };
    $("stop").disabled = false;
    while (state.placing === token) {
      let r;
      try {
        r = await fetch("/play/place", { method: "POST", credentials: "same-origin",
          headers: { "Content-Type": "application/json", "X-CSRFToken": csrf() },
          body: JSON.stringify(body) });
      } catch (e) { say(`Host unreachable: ${e}`, "error"); return; }
      const data = await r.json().catch(() => ({ error: `HTTP ${r.status}` }));
      if (state.placing !== token) return;
      if (r.status === 202) {
        say(`Waiting for the operator to approve this device (request ${data.id}).`, "pending");
        await new Promise((res) => setTimeout(res, 1500));
        continue;
      }
      if (!r.ok) { say(`Not placed: ${data.error}`, "refused"); return; }
      const url = data.handoff && data.handoff.url;
      if (typeof url !== "string" || !url.startsWith("https://")) {
        say("Not placed: the host answered without a member to go to.", "refused");
        return;
      }
      state.placed = data.member;
      say(`Placed on ${data.member.name} (${data.member.url}). Opening it…`, "placed");
      const form = document.createElement("form");
      form.method = "POST";
      form.action = url;
      const fields = { ticket: data.handoff.ticket, mode: $("mode").value, fps: $("fps").value };
      for (const [k, v] of Object.entries(fields)) {
        const input = document.createElement("input");
        input.type = "hidden"; input.name = k; input.value = v;
        form.appendChild(input);
      }
      document.body.appendChild(form);
      form.submit();
      return;
    }
  }

  function stop(why) {
    state.placing = null;
    const told = why !== "restart" && state.dc && state.dc.readyState === "open";
    if (told) send({ t: "stop" });  // a deliberate end: the host closes the game
    closeWs();
    if (state.pc) {
      const pc = state.pc; state.pc = null;
      if (told) setTimeout(() => pc.close(), 150); else pc.close();  // let "stop" leave first
    }
    state.dc = null;
    if (why !== "restart") { say("Stopped.", "stopped"); $("stop").disabled = true; }
  }

  function onHost(msg) {
    if (msg.t === "stats") state.host = msg;
    else if (msg.t === "pong" && state.pongs[msg.c]) { state.pongs[msg.c](); delete state.pongs[msg.c]; }
    else if (msg.t === "ws") openWs(msg.token, msg.codec || "h264");
    else if (msg.t === "clip-mode") clipMode(msg);
    else if (msg.t === "clip") clipFromHost(msg.text);
    else if (msg.t === "bye") {
      const pc = state.pc; state.pc = null; if (pc) pc.close();
      say(`Session ended by the host (${msg.reason}).`, "ended");
    }
  }

  // -- clipboard (host.conf `clipboard = text-only`) -------------------------------------------
  // The host says once live whether it shares the clipboard; until then, and when it says no
  // (or says nothing: `off`), the page sends no clipboard message at all.
  function clipSay(text) { $("clip").textContent = text; $("clip").hidden = false; }
  function clipMode(msg) {
    state.clip.on = msg.on === true;
    state.clip.max = Number(msg.max_bytes) || 65536;
    state.clip.why = msg.why || "";
    clipSay(state.clip.on ? "Clipboard shared with the session (text)."
                          : `No clipboard in this session: ${state.clip.why}`);
  }
  function clipFromHost(text) {
    if (!state.clip.on || typeof text !== "string") return;
    state.clip.last = text; state.clip.received++;
    clipSay(`Copied ${text.length} characters from the session.`);
    if (navigator.clipboard) navigator.clipboard.writeText(text).catch(() => {});
  }
  state.clipToHost = (text) => {
    if (!state.clip.on || typeof text !== "string" || !text || text === state.clip.last) return false;
    if (new TextEncoder().encode(text).length > state.clip.max) {
      clipSay(`Not sent to the session: over ${state.clip.max / 1024} KiB of text.`);
      return false;
    }
    send({ t: "clip", text }); state.clip.last = text; state.clip.sent++;
    clipSay(`Sent ${text.length} characters to the session.`);
    return true;
  };
  // Ctrl+V while playing: the text goes first, then the keys, so the app pastes the new text.
  document.addEventListener("paste", (e) => {
    if (!playing() || !state.clip.on || typing(e)) return;
    state.clipToHost(e.clipboardData ? e.clipboardData.getData("text/plain") : "");
    e.preventDefault();
    if (state.clip.pasteKey) {
      state.clip.pasteKey = false;
      send({ t: "k", vk: 86, d: 1 }); send({ t: "k", vk: 86, d: 0 });
    }
  });
  // Coming back to the page: what the user copied elsewhere meanwhile (when the browser lets us).
  window.addEventListener("focus", () => {
    if (playing() && state.clip.on && navigator.clipboard && navigator.clipboard.readText) {
      navigator.clipboard.readText().then(state.clipToHost).catch(() => {});
    }
  });

  // -- low-latency video: WebSocket + WebCodecs ----------------------------------------------
  const MAX_QUEUE = 2;  // decodeQueueSize above this: skip to the next keyframe
  function closeWs() {
    if (state.ws) { const ws = state.ws; state.ws = null; ws.close(); }
    if (state.decoder) {
      const d = state.decoder; state.decoder = null;
      if (d.state !== "closed") d.close();
    }
  }
  function openWs(token, codec) {
    closeWs();
    state.wsToken = token;
    state.codec = codec;
    const canvas = $("canvas"), g = canvas.getContext("2d");
    const wc = state.wc;
    let waitKey = true;
    const decoder = new VideoDecoder({
      output: (frame) => {
        if (canvas.width !== frame.displayWidth) canvas.width = frame.displayWidth;
        if (canvas.height !== frame.displayHeight) canvas.height = frame.displayHeight;
        g.drawImage(frame, 0, 0);
        frame.close();
        wc.decoded++;
      },
      error: (e) => { waitKey = true; say(`Decoder error: ${e.message}`); },
    });
    // No `description`: H.264 and HEVC chunks are Annex-B with their parameter sets in band
    // before each IDR; AV1 chunks are temporal units with the sequence header on keyframes.
    decoder.configure({ codec: CODEC_STRINGS[codec] || CODEC_STRINGS.h264, optimizeForLatency: true });
    state.decoder = decoder;
    // The token travels as a WebSocket subprotocol, never in the URL (URLs end up in logs).
    const ws = new WebSocket(`wss://${location.host}/native/ws`, ["hostmgmt.video", `token.${token}`]);
    ws.binaryType = "arraybuffer";
    state.ws = ws;
    ws.onmessage = (e) => {
      if (decoder.state !== "configured") return;
      const view = new DataView(e.data);
      const key = view.getUint8(0) === 1, tCap = view.getFloat64(1, true);
      wc.received++;
      wc.bytes += e.data.byteLength;
      wc.maxQueue = Math.max(wc.maxQueue, decoder.decodeQueueSize);
      if (decoder.decodeQueueSize > MAX_QUEUE && !key) {  // behind: catch up at the next IDR
        if (!waitKey) { wc.catchups++; send({ t: "kf" }); }
        waitKey = true;
      }
      if (waitKey && !key) { wc.skipped++; return; }
      waitKey = false;
      decoder.decode(new EncodedVideoChunk({ type: key ? "key" : "delta",
        timestamp: Math.round(tCap * 1e6), data: new Uint8Array(e.data, 17) }));
    };
    ws.onclose = () => { if (state.ws === ws) say("Video connection closed."); };
  }

  // -- stats overlay -----------------------------------------------------------------------
  let prev = null;
  setInterval(async () => {
    const pc = state.pc;
    if (!pc || pc.connectionState !== "connected") { $("stats").hidden = true; return; }
    const rep = await pc.getStats();
    let inb = null, rtt = null;
    rep.forEach((s) => {
      if (s.type === "inbound-rtp" && s.kind === "video") inb = s;
      if (s.type === "candidate-pair" && s.nominated && s.currentRoundTripTime !== undefined) rtt = s.currentRoundTripTime;
    });
    if (state.transport === "webcodecs") {  // the figures come from our own counters
      inb = { timestamp: performance.now(), framesDecoded: state.wc.decoded,
        bytesReceived: state.wc.bytes, totalDecodeTime: NaN,
        frameWidth: $("canvas").width, frameHeight: $("canvas").height };
    }
    if (!inb) return;
    const now = inb.timestamp;
    if (prev) {
      const dt = (now - prev.timestamp) / 1000;
      state.stats = {
        fps: (inb.framesDecoded - prev.framesDecoded) / dt,
        kbps: ((inb.bytesReceived - prev.bytesReceived) * 8) / dt / 1000,
        rtt_ms: rtt === null ? null : rtt * 1000,
        decode_ms: inb.framesDecoded && !Number.isNaN(inb.totalDecodeTime)
          ? (inb.totalDecodeTime / inb.framesDecoded) * 1000 : null,
        frames: inb.framesDecoded, width: inb.frameWidth, height: inb.frameHeight,
      };
      const s = state.stats;
      const codec = { h264: "H.264", hevc: "HEVC", av1: "AV1" }[
        state.transport === "webcodecs" ? state.codec : "h264"] || "";
      $("stats").textContent = `${codec}  ${s.width}x${s.height}  ${s.fps.toFixed(1)} fps  ` +
        `${Math.round(s.kbps)} kbit/s  RTT ${s.rtt_ms === null ? "?" : s.rtt_ms.toFixed(1)} ms  ` +
        `decode ${s.decode_ms === null ? "?" : s.decode_ms.toFixed(1)} ms  ` +
        `host encode ${state.host.encode_ms ?? "?"} ms`;
      $("stats").hidden = false;
    }
    prev = inb;
  }, 1000);

  // -- input ---------------------------------------------------------------------------------
  // The surface is the <video> (WebRTC) or the <canvas> (WebCodecs); both get the same handlers.
  const playing = () => state.state === "playing";
  const surface = () => (state.transport === "webcodecs" ? $("canvas") : $("video"));
  function contentPoint(e) {
    const el = surface(), r = el.getBoundingClientRect();
    const vw = (el.videoWidth ?? el.width) || r.width, vh = (el.videoHeight ?? el.height) || r.height;
    const scale = Math.min(r.width / vw, r.height / vh);
    const cw = vw * scale, ch = vh * scale;
    const x = e.clientX - r.left - (r.width - cw) / 2, y = e.clientY - r.top - (r.height - ch) / 2;
    return { x: Math.round(x / scale), y: Math.round(y / scale), w: vw, h: vh };
  }
  for (const el of [$("video"), $("canvas")]) {
    el.addEventListener("mousemove", (e) => {
      if (!playing()) return;
      if (document.pointerLockElement === el) send({ t: "r", dx: e.movementX, dy: e.movementY });
      else { const p = contentPoint(e); send({ t: "m", ...p }); }
    });
    el.addEventListener("mousedown", (e) => {
      if (!playing()) return;
      if (document.pointerLockElement !== el && document.fullscreenElement) el.requestPointerLock();
      const p = contentPoint(e); if (document.pointerLockElement !== el) send({ t: "m", ...p });
      send({ t: "b", b: e.button + 1, d: 1 }); e.preventDefault();
    });
    el.addEventListener("mouseup", (e) => { if (playing()) send({ t: "b", b: e.button + 1, d: 0 }); });
    el.addEventListener("contextmenu", (e) => e.preventDefault());
    el.addEventListener("wheel", (e) => {
      if (!playing()) return;
      if (e.deltaY) send({ t: "s", a: -Math.sign(e.deltaY) * 120, h: 0 });
      if (e.deltaX) send({ t: "s", a: Math.sign(e.deltaX) * 120, h: 1 });
      e.preventDefault();
    }, { passive: false });
  }
  const typing = (e) => e.target instanceof HTMLInputElement || e.target instanceof HTMLSelectElement;
  for (const [type, down] of [["keydown", 1], ["keyup", 0]]) {
    document.addEventListener(type, (e) => {
      if (!playing() || typing(e) || e.repeat) return;
      if (e.keyCode === 86 && (e.ctrlKey || e.metaKey) && state.clip.on) {
        // Let the browser's paste happen: the paste handler sends the text, then V.
        if (down) state.clip.pasteKey = true;
        return;
      }
      send({ t: "k", vk: e.keyCode, d: down }); e.preventDefault();
    });
  }

  // Gamepads (standard mapping) -> GameStream button flags, Y axes pointing up.
  const PAD_BUTTONS = [0x1000, 0x2000, 0x4000, 0x8000, 0x0100, 0x0200, 0, 0, 0x0020, 0x0010,
                       0x0040, 0x0080, 0x0001, 0x0002, 0x0004, 0x0008, 0x0400];
  const padSent = {};
  const axis = (v) => Math.max(-32768, Math.min(32767, Math.round((v || 0) * 32767)));
  function pollPads() {
    if (playing() && navigator.getGamepads) {
      for (const gp of navigator.getGamepads()) {
        if (!gp || gp.mapping !== "standard" || gp.index > 15) continue;
        let b = 0;
        gp.buttons.forEach((btn, i) => { if (btn.pressed && PAD_BUTTONS[i]) b |= PAD_BUTTONS[i]; });
        const msg = { t: "p", i: gp.index, b,
          lt: Math.round((gp.buttons[6]?.value || 0) * 255), rt: Math.round((gp.buttons[7]?.value || 0) * 255),
          lx: axis(gp.axes[0]), ly: axis(-gp.axes[1]), rx: axis(gp.axes[2]), ry: axis(-gp.axes[3]) };
        const key = JSON.stringify(msg);
        if (padSent[gp.index] !== key) { padSent[gp.index] = key; send(msg); }
      }
    }
    requestAnimationFrame(pollPads);
  }
  requestAnimationFrame(pollPads);

  $("fullscreen").addEventListener("click", async () => {
    await $("stage").requestFullscreen();
    if (navigator.keyboard && navigator.keyboard.lock) navigator.keyboard.lock().catch(() => {});
    surface().requestPointerLock();
  });
  $("stop").addEventListener("click", () => stop());
  // Closing the tab (or leaving the page) lets go of the connection on the way out, without
  // "stop": the host sees the player gone at once and the session settings decide (grace),
  // instead of finding out only when ICE consent expires half a minute later.
  window.addEventListener("pagehide", () => {
    const pc = state.pc;
    if (!pc) return;
    state.pc = null; state.dc = null;
    pc.close();
  });
  $("setup").addEventListener("submit", start);
  $("name").value = $("name").value || localStorage.getItem("native-name") || "";
  // Placed here by a fleet host: the player already pressed Start there. The browser lets
  // sound play only after a gesture on this page: the first click unmutes.
  if (document.body.dataset.autostart) {
    document.addEventListener("click", () => { $("video").muted = false; }, { once: true });
    start();
  }
})();

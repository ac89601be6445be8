// Shared helpers of the console pages: same-origin admin API calls with the session cookie.
"use strict";

const Console = (() => {
  function cookie(name) {
    const hit = document.cookie.split("; ").find((c) => c.startsWith(name + "="));
    return hit ? decodeURIComponent(hit.split("=")[1]) : "";
  }

  async function api(method, url, body) {
    const init = { method, credentials: "same-origin", headers: { Accept: "application/json" } };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    if (method !== "GET") init.headers["X-CSRFToken"] = cookie("csrftoken");
    const response = await fetch(url, init);
    if (response.status === 401) {
      window.location.assign("/login?next=" + encodeURIComponent(window.location.pathname));
      throw new Error("not logged in");
    }
    const type = response.headers.get("Content-Type") || "";
    const data = type.includes("json") ? await response.json() : await response.text();
    if (!response.ok || (data && data.status === false)) {
      const message = (data && data.error) || response.status + " " + response.statusText;
      const error = new Error(message);
      error.status = response.status;
      error.fields = (data && data.fields) || []; // v1: [{field, message}] of a 400
      throw error;
    }
    return data;
  }

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key === "class") node.className = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else if (key === "dataset") Object.assign(node.dataset, value);
      else node.setAttribute(key, value);
    }
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  function flash(message, isError) {
    const box = document.getElementById("flash");
    if (!box) return;
    box.textContent = message;
    box.className = isError ? "flash error" : "flash success";
    box.hidden = false;
  }

  // Lines on a canvas: series = [{values, color, max}], oldest first.
  function chart(canvas, series) {
    const ctx = canvas.getContext("2d");
    const w = canvas.width, h = canvas.height;
    ctx.clearRect(0, 0, w, h);
    ctx.strokeStyle = "#8884";
    ctx.strokeRect(0.5, 0.5, w - 1, h - 1);
    for (const s of series) {
      if (!s.values.length) continue;
      const max = s.max || Math.max(...s.values, 1);
      const step = s.values.length > 1 ? (w - 4) / (s.values.length - 1) : 0;
      ctx.strokeStyle = s.color;
      ctx.lineWidth = 2;
      ctx.beginPath();
      s.values.forEach((v, i) => {
        const x = 2 + i * step;
        const y = h - 2 - (Math.min(v, max) / max) * (h - 4);
        if (i === 0) ctx.moveTo(x, y);
        else ctx.lineTo(x, y);
      });
      ctx.stroke();
    }
  }

  return { api, el, flash, chart };
})();

"""What the store tests serve: a test CA and a certificate for 127.0.0.1, a real HTTPS server
holding a mutable set of files, plugin wheels built with `plugins.wheel` (and rewritten with
extra members, as a hostile author would), catalogs signed with a fresh Ed25519 key (the same
helpers `scripts/sign_catalog.py` uses), and distributions planted straight into the plugin
environment's site-packages (as a wheel installed before a check existed would be)."""

from __future__ import annotations

import base64
import datetime
import hashlib
import http.server
import ipaddress
import itertools
import json
import ssl
import textwrap
import threading
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from plugins import wheel
from plugins.store import signing


def make_ca(directory: Path) -> tuple[Path, Path, Path]:
    """(ca.pem, cert.pem, key.pem): a CA and a server certificate for 127.0.0.1."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    span = (now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=1))
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "store test CA")])
    ca = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(span[0]).not_valid_after(span[1])
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False),
                       True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(span[0]).not_valid_after(span[1])
        .add_extension(x509.SubjectAlternativeName(
            [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), True)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                       False)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    pem = serialization.Encoding.PEM
    paths = directory / "ca.pem", directory / "cert.pem", directory / "key.pem"
    paths[0].write_bytes(ca.public_bytes(pem))
    paths[1].write_bytes(cert.public_bytes(pem))
    paths[2].write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return paths


@dataclass
class FileServer:
    """A real HTTPS server on 127.0.0.1 serving `files` (path -> bytes; edit it to tamper)."""

    cert: Path
    key: Path
    files: dict = field(default_factory=dict)
    hits: list = field(default_factory=list)

    def __post_init__(self):
        files, hits = self.files, self.hits

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # http.server's name
                hits.append(self.path)
                body = files.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # A client that hangs up early (an oversized body refused) is expected here.
        self.httpd.handle_error = lambda request, address: None
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.cert, self.key)
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base(self) -> str:
        return f"https://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def build_plugin(tmp: Path, name="host-plugin-hello", ep_id="hello", version="1.0.0",
                 body="def main():\n    import time\n    time.sleep(3600)\n",
                 deps: tuple = ()) -> Path:  # fmt: skip
    """A plugin wheel built from a throwaway source folder."""
    src = tmp / f"src-{name}-{version}"
    pkg = name.replace("-", "_")
    (src / pkg).mkdir(parents=True)
    dep_line = f"dependencies = {json.dumps(list(deps))}\n" if deps else ""
    (src / "pyproject.toml").write_text(
        textwrap.dedent(f"""
        [project]
        name = "{name}"
        version = "{version}"
        description = "a store test plugin"
        """)
        + dep_line
        + textwrap.dedent(f"""
        [project.entry-points."hostmgmt.plugins"]
        {ep_id} = "{pkg}:main"
        """)
    )
    (src / pkg / "__init__.py").write_text(body)
    return wheel.build_wheel(src, tmp / "wheels")


def entry(wheel_path: Path, url: str, **over) -> dict:
    """A catalog entry for a wheel built by `build_plugin`."""
    dist = wheel_path.name.split("-")
    pkg = dist[0].replace("_", "-")
    out = {
        "id": pkg.removeprefix("host-plugin-"), "pkg": pkg, "title": pkg.title(),
        "description": "test", "author": "tests", "version": dist[1],
        "wheel": {"url": url, "sha256": hashlib.sha256(wheel_path.read_bytes()).hexdigest()},
        "platforms": ["linux"],
    }  # fmt: skip
    out.update(over)
    return out


_SERIALS = itertools.count(1)


def expires_in(seconds: float) -> str:
    """An `expires` value `seconds` from now (negative: in the past)."""
    when = datetime.datetime.fromtimestamp(time.time() + seconds, datetime.UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def signed_catalog(entries: list[dict], key, *, serial: int | None = None,
                   expires: str | None = None) -> tuple[bytes, bytes]:  # fmt: skip
    """(catalog.json bytes, catalog.json.sig bytes). Each call without `serial` takes the next
    of a counter (a later catalog is newer, as a publisher's would be); `expires` defaults to a
    day from now."""
    doc = {"format": 1, "serial": next(_SERIALS) if serial is None else serial,
           "expires": expires or expires_in(86400), "plugins": entries}  # fmt: skip
    body = json.dumps(doc, indent=1).encode()
    return body, signing.sign(key, body)


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def rewrite_wheel(wheel_path: Path, add: dict | None = None,
                  entry_points: str | None = None) -> Path:  # fmt: skip
    """The wheel rewritten in place with extra members (`add`: name -> bytes) and, when given,
    another entry_points.txt; its RECORD is regenerated so pip would accept it."""
    with zipfile.ZipFile(wheel_path) as archive:
        files = {n: archive.read(n) for n in archive.namelist()}
    info = next(n.split("/")[0] for n in files if n.endswith(".dist-info/METADATA"))
    files.pop(f"{info}/RECORD")
    files.update(add or {})
    if entry_points is not None:
        files[f"{info}/entry_points.txt"] = entry_points.encode()
    rows = [f"{n},{_record_hash(d)},{len(d)}" for n, d in files.items()] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = ("\n".join(rows) + "\n").encode()
    with zipfile.ZipFile(wheel_path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return wheel_path


def plant_dist(site: Path, name: str, version: str, entry_points: dict[str, str],
               files: dict[str, str]) -> Path:  # fmt: skip
    """Write a distribution straight into `site` (site-packages): its files, and a dist-info
    with METADATA, entry_points.txt (`entry_points`: plugin id -> target) and a RECORD listing
    everything, as pip leaves one. Returns the dist-info folder."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    written = {}
    for rel, text in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
        written[rel] = text.encode()
    lines = ["[hostmgmt.plugins]"] + [f"{k} = {v}" for k, v in entry_points.items()]
    meta = {"METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
            "entry_points.txt": "\n".join(lines) + "\n", "INSTALLER": "pip\n"}  # fmt: skip
    for rel, text in meta.items():
        (info / rel).write_text(text)
        written[f"{info.name}/{rel}"] = text.encode()
    rows = [f"{n},{_record_hash(d)},{len(d)}" for n, d in written.items()]
    (info / "RECORD").write_text("\n".join([*rows, f"{info.name}/RECORD,,"]) + "\n")
    return info


def public_key(key) -> str:
    return signing.format_public_key(key.public_key())

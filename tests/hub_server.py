"""A Hugging Face Hub on 127.0.0.1 for the tests: the `resolve` endpoint
`huggingface_hub` downloads through (HEAD for the commit, ETag and size;
GET with byte ranges), its error codes, and switches to misbehave."""

import hashlib
import http.server
import threading
import urllib.parse

LFS_SUFFIXES = (".safetensors", ".bin", ".h5")


def etag_of(name, data):
    """The Hub's ETag: SHA-256 for an LFS file, the git blob id else."""
    if name.endswith(LFS_SUFFIXES):
        return hashlib.sha256(data).hexdigest()
    return hashlib.sha1(f"blob {len(data)}\0".encode() + data).hexdigest()


class LocalHub:
    """Serves `repos`: {repo id: {revision name: {file name: bytes}}}.

    Attributes:
        url: the endpoint (set `HF_ENDPOINT` to it).
        requests: (method, path, headers by lower-case name) of every request.
        corrupt: file names served with one byte changed (same size).
        drop_after: {file name: bytes} sent before the first GET of it
            breaks off (the next GET asks for the rest with a Range).
    """

    def __init__(self, repos):
        self.repos = repos
        self.requests, self.corrupt, self.drop_after = [], set(), {}
        hub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_HEAD(self):
                hub._serve(self, body=False)

            def do_GET(self):
                hub._serve(self, body=True)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                                      Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever,
                         daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    @staticmethod
    def commit_of(repo, revision):
        return hashlib.sha1(f"{repo}@{revision}".encode()).hexdigest()

    def gets(self, name=""):
        return [r for r in self.requests if r[0] == "GET" and
                r[1].endswith("/" + name)]

    def _find(self, path):
        """(status, error code, commit, file name, data)."""
        parts = urllib.parse.unquote(path).strip("/").split("/")
        if "resolve" not in parts:
            return 404, "RepoNotFound", None, None, None
        at = parts.index("resolve")
        repo, revision = "/".join(parts[:at]), parts[at + 1]
        name = "/".join(parts[at + 2:])
        if repo not in self.repos:
            return 404, "RepoNotFound", None, name, None
        revisions = self.repos[repo]
        by_commit = {self.commit_of(repo, r): r for r in revisions}
        revision = by_commit.get(revision, revision)
        if revision not in revisions:
            return 404, "RevisionNotFound", None, name, None
        commit = self.commit_of(repo, revision)
        if name not in revisions[revision]:
            return 404, "EntryNotFound", commit, name, None
        return 200, None, commit, name, revisions[revision][name]

    def _serve(self, handler, body):
        self.requests.append((handler.command, handler.path,
                              {k.lower(): v for k, v in handler.headers.items()}))
        status, error, commit, name, data = self._find(handler.path)
        if status != 200:
            handler.send_response(status)
            handler.send_header("X-Error-Code", error)
            if commit:
                handler.send_header("X-Repo-Commit", commit)
            handler.send_header("Content-Length", "0")
            handler.end_headers()
            return
        etag = etag_of(name, data)
        if name in self.corrupt:
            data = bytes([data[0] ^ 0xFF]) + data[1:]
        start = 0
        ranged = handler.headers.get("Range", "")
        if ranged.startswith("bytes="):
            start = int(ranged[len("bytes="):].split("-")[0])
        handler.send_response(206 if start else 200)
        handler.send_header("X-Repo-Commit", commit)
        handler.send_header("ETag", f'"{etag}"')
        handler.send_header("Content-Length", str(len(data) - start))
        handler.end_headers()
        if not body:
            return
        cut = self.drop_after.pop(name, None)
        if cut is not None:
            handler.wfile.write(data[start:cut])
            handler.wfile.flush()
            handler.connection.shutdown(2)  # the network breaks mid-file
            return
        handler.wfile.write(data[start:])

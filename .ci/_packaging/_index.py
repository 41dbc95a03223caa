"""Step 3: the private index, and publishing to it.

pypiserver runs from a throwaway venv on 127.0.0.1 and a free port with ``--disable-fallback``
(a name it does not hold is a 404, never a redirect to the public index) and without
``--overwrite`` (a file it holds is never replaced). ``-a . -P .`` turns authentication off
for every action, so the stage can publish over HTTP; the server listens on loopback only.
The locked third-party wheels are downloaded into its folder, as a private mirror would hold
them; the project's own dists are *published* through pypiserver's upload API.
"""

from __future__ import annotations

import html
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ._distributions import Distribution
from ._shell import Argument, StageFailure, make_venv, run, step, uv, venv_bin

# Loopback only: no proxy from the environment may stand between the stage and its index.
_LOOPBACK: Final = urllib.request.build_opener(urllib.request.ProxyHandler({}))
_START_ATTEMPTS: Final = 100


@dataclass(frozen=True)
class PublishAnswer:
    """pypiserver's answer to one upload: its HTTP status and, for a refusal, its message."""

    status: int
    message: str = ""

    def __str__(self) -> str:
        return f"{self.status} {self.message}" if self.message else str(self.status)


@dataclass(frozen=True)
class PrivateIndex:
    """A running pypiserver on 127.0.0.1: its base URL and the folder it serves."""

    url: str
    folder: Path

    @property
    def simple(self) -> str:
        """The simple-API URL that pip's ``--index-url`` takes."""
        return f"{self.url}/simple/"

    def pip_install(self, venv: Path, *requirements: str, quiet: bool = True) -> list[Argument]:
        """``pip install`` in ``venv`` from this index alone: wheels only, no cache."""
        options = ["--quiet"] if quiet else []
        options += ["--no-cache-dir", "--only-binary=:all:", "--index-url", self.simple]
        return [venv_bin(venv, "pip"), "install", *options, *requirements]

    def publish(self, path: Path) -> PublishAnswer:
        """Upload one file the way twine does (a multipart ``file_upload`` form).

        Raises:
            StageFailure: the index cannot be reached at all.
        """
        boundary = uuid.uuid4().hex
        body = b"".join(
            [
                f"--{boundary}\r\n".encode(),
                b'Content-Disposition: form-data; name=":action"\r\n\r\nfile_upload\r\n',
                f"--{boundary}\r\n".encode(),
                f'Content-Disposition: form-data; name="content"; filename="{path.name}"\r\n'.encode(),
                b"Content-Type: application/octet-stream\r\n\r\n",
                path.read_bytes(),
                f"\r\n--{boundary}--\r\n".encode(),
            ]
        )
        request = urllib.request.Request(f"{self.url}/", data=body, method="POST")
        request.add_header("Content-Type", f"multipart/form-data; boundary={boundary}")
        try:
            with _LOOPBACK.open(request, timeout=30) as response:
                return PublishAnswer(response.status)
        except urllib.error.HTTPError as error:
            page = error.read().decode(errors="replace")
            # pypiserver's error page carries its message in <pre>...</pre>
            message = page.split("<pre>", 1)[-1].split("</pre>", 1)[0] if "<pre>" in page else page
            return PublishAnswer(error.code, " ".join(html.unescape(message).split())[:300])
        except OSError as error:
            raise StageFailure(f"publishing {path.name}: {error}") from error


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _mirror_third_party(repo: Path, work: Path, folder: Path) -> None:
    """The locked third-party dependencies of every member, downloaded from PyPI into ``folder``."""
    requirements = work / "third-party.txt"
    export = ("--no-default-groups", "--no-emit-workspace", "--no-hashes", "--no-header", "--no-annotate")
    run(
        uv("export", "--frozen", "--all-packages", *export, "--output-file", requirements, "--quiet"),
        cwd=repo,
    )
    download = ("download", "--quiet", "--no-cache-dir", "--only-binary=:all:", "--dest", folder)
    run([sys.executable, "-m", "pip", *download, "--requirement", requirements])


def _wait_until_up(index: PrivateIndex, server: subprocess.Popen[bytes], log: Path) -> None:
    for _ in range(_START_ATTEMPTS):
        try:
            with _LOOPBACK.open(index.simple, timeout=1):
                return
        except OSError:
            if server.poll() is not None:
                print(log.read_text(errors="replace"), file=sys.stderr)
                raise StageFailure("pypiserver exited") from None
            time.sleep(0.1)
    print(log.read_text(errors="replace"), file=sys.stderr)
    raise StageFailure(f"pypiserver did not answer {index.simple} after {_START_ATTEMPTS} attempts")


def _check_no_fallback(index: PrivateIndex) -> None:
    """A name the index does not hold is a 404 (urllib would follow a redirect to PyPI)."""
    try:
        with _LOOPBACK.open(f"{index.simple}requests/", timeout=10):
            pass
    except urllib.error.HTTPError as error:
        if error.code == 404:
            print("a name the index does not hold (requests): 404, no fallback")
            return
        raise StageFailure(f"the index answered HTTP {error.code} for 'requests', not 404") from error
    except OSError as error:
        raise StageFailure(f"asking the index for 'requests': {error}") from error
    raise StageFailure("the index answered for 'requests': the public-index fallback is not disabled")


def _stop(server: subprocess.Popen[bytes]) -> None:
    server.terminate()
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


@contextmanager
def private_index(repo: Path, work: Path) -> Generator[PrivateIndex]:
    """Install and start pypiserver under ``work``, mirror the third-party wheels into it.

    The server is stopped when the block ends, however it ends.

    Raises:
        StageFailure: pypiserver cannot be installed or started, or it falls back to PyPI.
    """
    step("private index: pypiserver on 127.0.0.1, public-index fallback disabled")
    folder = work / "index"
    folder.mkdir()
    server_venv = make_venv(work / "pypiserver-venv")
    run([venv_bin(server_venv, "pip"), "install", "--quiet", "--no-cache-dir", "pypiserver>=2.1,<3"])
    run([venv_bin(server_venv, "pypi-server"), "--version"])
    _mirror_third_party(repo, work, folder)
    port = _free_port()
    index = PrivateIndex(f"http://127.0.0.1:{port}", folder)
    log = work / "pypiserver.log"
    command = [str(venv_bin(server_venv, "pypi-server")), "run", "--host", "127.0.0.1", "--port", str(port)]
    command += ["--disable-fallback", "--authenticate", ".", "--passwords", ".", "--log-file", str(log)]
    with log.open("ab") as sink:
        server = subprocess.Popen([*command, str(folder)], stdout=sink, stderr=subprocess.STDOUT)
    try:
        _wait_until_up(index, server, log)
        print(f"index: {index.simple} (pid {server.pid})")
        _check_no_fallback(index)
        yield index
    finally:
        _stop(server)


def publish_all(index: PrivateIndex, dist: Path, workspace: Distribution) -> None:
    """Publish every built wheel and sdist; publishing ``workspace``'s wheel again must be refused.

    Raises:
        StageFailure: an upload is not accepted, or the repeated one is not refused with 409.
    """
    step("publish every sdist and wheel to the private index")
    for path in sorted(dist.glob("*.whl")) + sorted(dist.glob("*.tar.gz")):
        answer = index.publish(path)
        if answer.status != 200:
            raise StageFailure(f"publishing {path.name}: HTTP {answer}")
        print(f"published {path.name}")
    # The same version again must be refused, not silently overwritten.
    again = index.publish(dist / workspace.wheel)
    if again.status != 409:
        raise StageFailure(f"re-publishing {workspace.name} {workspace.version} was not refused: {again}")
    print(f"re-publishing {workspace.wheel} refused: {again}")
    held = sum(1 for path in index.folder.rglob("*") if path.is_file())
    print(f"the index holds {held} files")

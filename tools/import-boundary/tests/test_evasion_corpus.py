"""The evasion corpus of issue #15: forms that reached the host past the deny-list lint.

Each form is written as a file of the kernel's own tree and checked with the repository's
own configuration, through the public API alone (``load_config`` and ``check_paths``), so
this file runs unchanged against any version of the checker: against the deny-list checker
of main most of these cases fail. Every form must come out flagged: an active IB001 or IB002
finding, or an IB003 for the files that are not source.

The forms are real exploits, not sketches: ``test_the_live_forms_really_reach_the_host``
runs each one marked live in a child interpreter and checks that it creates its marker file
(or reads the secret file) in a temporary folder. Forms that need a console, a network or a
module context are checked by the lint only.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import marshal
import subprocess
import sys
import textwrap
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Final, NamedTuple

import pytest

from harness_import_boundary import Finding, check_paths, load_config

REPOSITORY: Final = Path(__file__).resolve().parents[3]
KERNEL_PACKAGE: Final = "packages/kernel/src/harness_kernel"
KERNEL_MODULE: Final = f"{KERNEL_PACKAGE}/_evasion.py"
FLAGGING_RULES: Final = frozenset({"IB001", "IB002", "IB003"})
SECRET_TEXT: Final = "the secret line\n"


class Form(NamedTuple):
    """One evasion: its source, whether the liveness test runs it, and where it is placed."""

    source: str
    live: bool
    path: str = KERNEL_MODULE


def live(source: str, path: str = KERNEL_MODULE) -> Form:
    """A form that, run with ``MARKER``, ``DIR``, ``NAME`` and ``SECRET`` defined, creates
    ``MARKER`` or sets ``LEAK`` to the contents of ``SECRET``."""
    return Form(textwrap.dedent(source), True, path)


def static(source: str, path: str = KERNEL_MODULE) -> Form:
    """A form checked by the lint only (console, network or module context needed)."""
    return Form(textwrap.dedent(source), False, path)


CREATE: Final = "0o101"  # O_CREAT | O_WRONLY on Linux, for the forms that reach os.open
RUN_IN_FORWARD_REFERENCE: Final = "\"open(MARKER, 'w').close() or int\""
"""A forward reference's text: evaluated, it creates the marker (and is then the type int)."""
FORWARD_GLOBALS: Final = "{'MARKER': MARKER}, {}, frozenset()"
"""The arguments of ``ForwardRef._evaluate``: the namespace the text runs in."""


def wide(text: str) -> str:
    """``text`` with its ASCII letters made fullwidth (NFKC folds them back)."""
    return "".join(chr(ord(character) + 0xFEE0) if character.isalpha() else character for character in text)


def bold(text: str) -> str:
    """``text`` with its lowercase ASCII letters made mathematical bold (NFKC folds them back)."""
    return "".join(
        chr(0x1D41A + ord(character) - ord("a")) if character.islower() else character for character in text
    )


FORMS: Final[dict[str, Form]] = {
    # -- identifiers Python normalises with NFKC
    "fullwidth import os": live(f"import {wide('os')} as m\nm.close(m.open(MARKER, {CREATE}))\n"),
    "fullwidth from subprocess import": live(
        f'from {wide("subprocess")} import run\nrun(["touch", MARKER], check=True)\n'
    ),
    "fullwidth open": live(f'{wide("open")}(MARKER, "w").close()\n'),
    "mathematical bold open": live(f'{bold("open")}(MARKER, "w").close()\n'),
    "fullwidth exec": live(f"{wide('exec')}(\"open(MARKER, 'w').close()\")\n"),
    "fullwidth eval": live(f"{wide('eval')}(\"open(MARKER, 'w').close()\")\n"),
    "fullwidth __import__": live(f'm = {wide("__import__")}("os")\nm.close(m.open(MARKER, {CREATE}))\n'),
    "fullwidth attribute sys": live(
        f'import typing\nm = typing.{wide("sys")}.modules["os"]\nm.close(m.open(MARKER, {CREATE}))\n'
    ),
    "fullwidth name bound to exec": live(f"{wide('e')} = exec\ne(\"open(MARKER, 'w').close()\")\n"),
    # -- builtins bound, passed or decorated instead of called
    "exec bound to a name": live("run = exec\nrun(\"open(MARKER, 'w').close()\")\n"),
    "eval bound to a name": live("ev = eval\nev(\"open(MARKER, 'w').close()\")\n"),
    "exec mapped over strings": live("list(map(exec, [\"open(MARKER, 'w').close()\"]))\n"),
    "exec as a decorator": live(
        """\
        @exec
        @(lambda function: "open(MARKER, 'w').close()")
        def payload():
            pass
        """
    ),
    "exec as a parameter default": live("def go(run=exec):\n    run(\"open(MARKER, 'w').close()\")\ngo()\n"),
    "exec kept in a dict": live("tools = {'r': exec}\ntools['r'](\"open(MARKER, 'w').close()\")\n"),
    "compile into a new function": live(
        "code = compile(\"open(MARKER, 'w').close()\", 'x', 'exec')\n"
        "(lambda: None).__class__(code, {'MARKER': MARKER})()\n"
    ),
    "breakpoint": static("breakpoint()\n"),
    "input": static("text = input()\n"),
    "help": static("help('modules')\n"),
    "license": static("license()\n"),
    "exit": static("exit(0)\n"),
    # -- builtins reached through namespaces
    "globals builtins": live('globals()["__builtins__"]["open"](MARKER, "w").close()\n'),
    "vars builtins": live('vars()["__builtins__"]["open"](MARKER, "w").close()\n'),
    "locals builtins": live('locals()["__builtins__"]["open"](MARKER, "w").close()\n'),
    "bare __builtins__": live('__builtins__["open"](MARKER, "w").close()\n'),
    "print.__self__": live('print.__self__.open(MARKER, "w").close()\n'),
    "len.__self__.__import__": live(
        f'm = len.__self__.__import__("os")\nm.close(m.open(MARKER, {CREATE}))\n'
    ),
    "function __globals__": live('(lambda: 0).__globals__["__builtins__"]["open"](MARKER, "w").close()\n'),
    "function __builtins__": live('(lambda: 0).__builtins__["open"](MARKER, "w").close()\n'),
    "object subclasses": live(
        f"""\
        wrap = [c for c in ().__class__.__base__.__subclasses__() if c.__name__ == "_wrap_close"][0]
        g = wrap.__init__.__globals__
        g["close"](g["open"](MARKER, {CREATE}))
        """
    ),
    "type.__subclasses__(object)": live(
        f"""\
        wrap = [c for c in type.__subclasses__(object) if c.__name__ == "_wrap_close"][0]
        g = wrap.__init__.__globals__
        g["close"](g["open"](MARKER, {CREATE}))
        """
    ),
    "type.__dict__ subclasses": live(
        f"""\
        found = type.__dict__["__subclasses__"](object)
        g = [c for c in found if c.__name__ == "_wrap_close"][0].__init__.__globals__
        g["close"](g["open"](MARKER, {CREATE}))
        """
    ),
    "getattr with a constant dunder": live(
        f"""\
        found = getattr(object, "__subclasses__")()
        g = [c for c in found if c.__name__ == "_wrap_close"][0].__init__.__globals__
        g["close"](g["open"](MARKER, {CREATE}))
        """
    ),
    "getattr with a computed name": live(
        'getattr(getattr(print, "__se" + "lf__"), "op" + "en")(MARKER, "w").close()\n'
    ),
    "object.__getattribute__": live('object.__getattribute__(print, "__self__").open(MARKER, "w").close()\n'),
    "operator.attrgetter": live(
        'import operator\noperator.attrgetter("__self__.open")(print)(MARKER, "w").close()\n'
    ),
    "operator.methodcaller": live(
        f"""\
        import operator
        found = operator.methodcaller("__subclasses__")(object)
        g = [c for c in found if c.__name__ == "_wrap_close"][0].__init__.__globals__
        g["close"](g["open"](MARKER, {CREATE}))
        """
    ),
    "functools.reduce over getattr": live(
        'import functools\nfunctools.reduce(getattr, ["__self__", "open"], print)(MARKER, "w").close()\n'
    ),
    "string.Formatter.get_field": live(
        'import string\nfound = string.Formatter().get_field("0.__self__", (print,), {})[0]\n'
        'found.open(MARKER, "w").close()\n'
    ),
    "generator frame": live('g = (x for x in [0])\ng.gi_frame.f_builtins["open"](MARKER, "w").close()\n'),
    "traceback frame": live(
        """\
        try:
            raise ValueError
        except ValueError as error:
            error.__traceback__.tb_frame.f_globals["__builtins__"]["open"](MARKER, "w").close()
        """
    ),
    "coroutine frame": live(
        """\
        async def pending():
            pass
        coroutine = pending()
        coroutine.cr_frame.f_builtins["open"](MARKER, "w").close()
        coroutine.close()
        """
    ),
    "a function's code replaced": live(
        "def f():\n    return 0\nf.__code__ = (lambda: open(MARKER, 'w').close()).__code__\nf()\n"
    ),
    "module loader reads a file": static("LEAK = __loader__.get_data(SECRET)\n"),
    "module spec loader": static("LEAK = __spec__.loader.get_data(SECRET)\n"),
    # -- sys, frames and the import system
    "sys._getframe": live('import sys\nsys._getframe().f_builtins["open"](MARKER, "w").close()\n'),
    "vars(sys) modules": live(
        f'import sys\nm = vars(sys)["modules"]["os"]\nm.close(m.open(MARKER, {CREATE}))\n'
    ),
    "sys.modules with a computed key": live(
        f'import sys\nm = sys.modules["o" + "s"]\nm.close(m.open(MARKER, {CREATE}))\n'
    ),
    "inspect.currentframe": live(
        'import inspect\ninspect.currentframe().f_builtins["open"](MARKER, "w").close()\n'
    ),
    "getattr(importlib, 'import_module')": live(
        f'import importlib\nm = getattr(importlib, "import_module")("os")\n'
        f"m.close(m.open(MARKER, {CREATE}))\n"
    ),
    "pkgutil.resolve_name": live(
        f'import pkgutil\nfd = pkgutil.resolve_name("os:open")(MARKER, {CREATE})\n'
        'pkgutil.resolve_name("os:close")(fd)\n'
    ),
    "importlib.metadata locate_file": live(
        "import importlib.metadata\n"
        'importlib.metadata.distribution("msgspec").locate_file(MARKER).write_text("x")\n'
    ),
    "importlib.util find_spec": static(
        'import importlib.util\nloader = importlib.util.find_spec("os").loader\n'
    ),
    "timeit runs a statement": live(
        "import timeit\ntimeit.timeit(\"open(M, 'w').close()\", globals={'M': MARKER}, number=1)\n"
    ),
    # -- host modules re-exported by allowed or harmless-looking modules
    "pathlib.os": live(f"import pathlib\npathlib.os.close(pathlib.os.open(MARKER, {CREATE}))\n"),
    "posixpath.os": live(f"import posixpath\nposixpath.os.close(posixpath.os.open(MARKER, {CREATE}))\n"),
    "typing.sys": live(f'import typing\nm = typing.sys.modules["os"]\nm.close(m.open(MARKER, {CREATE}))\n'),
    "from typing import sys": live(
        f'from typing import sys\nm = sys.modules["os"]\nm.close(m.open(MARKER, {CREATE}))\n'
    ),
    "enum.bltns": live('import enum\nenum.bltns.open(MARKER, "w").close()\n'),
    "dataclasses.builtins": live('import dataclasses\ndataclasses.builtins.open(MARKER, "w").close()\n'),
    "contextlib.os": live(f"import contextlib\ncontextlib.os.close(contextlib.os.open(MARKER, {CREATE}))\n"),
    "uuid.os": live(f"import uuid\nuuid.os.close(uuid.os.open(MARKER, {CREATE}))\n"),
    "random._os": live(f"import random\nrandom._os.close(random._os.open(MARKER, {CREATE}))\n"),
    "platform.os": live(f"import platform\nplatform.os.close(platform.os.open(MARKER, {CREATE}))\n"),
    "from json import tool": live(
        f'from json import tool\nm = tool.sys.modules["os"]\nm.close(m.open(MARKER, {CREATE}))\n'
    ),
    "a module bound to a local name": live(
        f'import typing\nalias = typing\nm = alias.sys.modules["os"]\nm.close(m.open(MARKER, {CREATE}))\n'
    ),
    "getattr on an allowed module": live(
        f'import typing\nm = getattr(typing, "sys").modules["os"]\nm.close(m.open(MARKER, {CREATE}))\n'
    ),
    "typing.get_type_hints evaluates a string": live(
        """\
        import typing
        def f(x: "open(MARKER, 'w').close()"):
            pass
        typing.get_type_hints(f)
        """
    ),
    "typing.ForwardRef evaluates a string": live(
        "import typing\n"
        "typing.ForwardRef(\"open(MARKER, 'w').close()\")._evaluate({'MARKER': MARKER}, None, frozenset())\n"
    ),
    "types.FunctionType from code": live(
        "import types\n"
        "types.FunctionType((lambda: open(MARKER, 'w').close()).__code__, {'MARKER': MARKER})()\n"
    ),
    "warnings.formatwarning reads any file": live(
        'import warnings\ntext = warnings.formatwarning("m", UserWarning, SECRET, 1)\n'
        'LEAK = text.splitlines()[1].strip() + "\\n"\n'
    ),
    "contextlib.chdir": static("import contextlib\nwith contextlib.chdir('/'):\n    pass\n"),
    "uuid.getnode": static("import uuid\nnode = uuid.getnode()\n"),
    "an allowed module patched": static("import typing\ntyping.TYPE_CHECKING = True\n"),
    "setattr on an allowed module": static("import json\nsetattr(json, 'loads', len)\n"),
    "star import of trio": static("from trio import *\n"),
    # -- strings that msgspec and typing evaluate as type annotations
    "a string annotation on a Struct field": live(
        """\
        import msgspec
        class Payload(msgspec.Struct):
            x: "open(MARKER, 'w').close() or int"
        msgspec.json.decode(b'{"x": 1}', type=Payload)
        """
    ),
    "a string annotation through a name": live(
        """\
        import msgspec
        HIDDEN = "open(MARKER, 'w').close() or int"
        class Payload(msgspec.Struct):
            x: HIDDEN
        msgspec.json.decode(b'{"x": 1}', type=Payload)
        """
    ),
    "a string nested in a string annotation": live(
        """\
        import msgspec
        class Payload(msgspec.Struct):
            x: "list['open(MARKER, chr(119)).close() or int']"
        msgspec.json.decode(b'{"x": [1]}', type=Payload)
        """
    ),
    "a NamedTuple built with a string field type": live(
        """\
        import msgspec
        import typing
        Row = typing.NamedTuple("Row", [("x", "open(MARKER, 'w').close() or int")])
        msgspec.json.decode(b'[1]', type=Row)
        """
    ),
    "msgspec.defstruct with a string field type": live(
        """\
        import msgspec
        Payload = msgspec.defstruct("Payload", [("x", "open(MARKER, 'w').close() or int")])
        msgspec.json.decode(b'{"x": 1}', type=Payload)
        """
    ),
    "a class built by type() with string annotations": live(
        """\
        import msgspec
        fields = {"__annotations__": {"x": "open(MARKER, 'w').close() or int"}}
        Payload = type("Payload", (msgspec.Struct,), fields)
        msgspec.json.decode(b'{"x": 1}', type=Payload)
        """
    ),
    "a type built from computed fields": static(
        "import typing\nfields = load()\nRow = typing.NamedTuple('Row', fields)\n"
    ),
    "annotations written after the class": live(
        """\
        import msgspec
        class Payload(msgspec.Struct):
            x: int
        Payload.__annotations__["x"] = "open(MARKER, 'w').close() or int"
        msgspec.json.decode(b'{"x": 1}', type=Payload)
        """
    ),
    # -- attributes read by the names a type or a key declares
    "a class __dict__ held in a variable": live(
        f"""\
        klass = type
        namespace = klass.__dict__
        found = namespace["__subclasses__"](object)
        g = [c for c in found if c.__name__ == "_wrap_close"][0].__init__.__globals__
        g["close"](g["open"](MARKER, {CREATE}))
        """
    ),
    "an instance __dict__ gadget called with a class": live(
        f"""\
        class Error(Exception):
            def __reduce__(self):
                return (type(self), (), self.__dict__)
        name = "__sub" + "classes__"
        found = Error.__reduce__(type)[2][name](object)
        g = [c for c in found if c.__name__ == "_wrap_close"][0].__init__.__globals__
        g["close"](g["open"](MARKER, {CREATE}))
        """
    ),
    "msgspec.convert from attributes": live(
        """\
        import msgspec
        class View(msgspec.Struct):
            __self__: object
        builtins_module = msgspec.structs.astuple(msgspec.convert(print, View, from_attributes=True))[0]
        builtins_module.open(MARKER, "w").close()
        """
    ),
    "msgspec.convert through a renamed field": live(
        """\
        import msgspec
        class View(msgspec.Struct, rename={"x": "__self__"}):
            x: object
        msgspec.convert(print, View, from_attributes=True).x.open(MARKER, "w").close()
        """
    ),
    "a pattern reading a dangerous attribute": live(
        """\
        match print:
            case object(__self__=module):
                module.open(MARKER, "w").close()
        """
    ),
    # -- pathlib writes
    "Path.open with star mode": live('from pathlib import Path\nPath(MARKER).open(*"w").close()\n'),
    "Path.open with a mode in kwargs": live(
        'from pathlib import Path\nPath(MARKER).open(**{"mode": "w"}).close()\n'
    ),
    "getattr(Path, 'write_text')": live(
        'from pathlib import Path\ngetattr(Path(MARKER), "write_text")("x")\n'
    ),
    "methodcaller write_text": live(
        'import operator\nfrom pathlib import Path\noperator.methodcaller("write_text", "x")(Path(MARKER))\n'
    ),
    "Path found among PurePath's subclasses": live(
        """\
        from pathlib import PurePath
        concrete = [c for c in PurePath.__subclasses__() if c.__name__ == "Path"][0]
        concrete(MARKER).write_text("x")
        """
    ),
    # -- modules that were not on the deny list at all
    "posix": live("import posix\nposix.close(posix.open(MARKER, posix.O_CREAT | posix.O_WRONLY))\n"),
    "_io": live('import _io\n_io.open(MARKER, "w").close()\n'),
    "_pyio": live('import _pyio\n_pyio.open(MARKER, "w").close()\n'),
    "ctypes": live(
        f"import ctypes\nlibc = ctypes.CDLL(None)\nlibc.close(libc.open(MARKER.encode(), {CREATE}, 0o644))\n"
    ),
    "socket": live(
        "import socket\nserver = socket.socket(socket.AF_UNIX)\nserver.bind(MARKER)\nserver.close()\n"
    ),
    "sqlite3 outside the store": live(
        "import sqlite3\nconnection = sqlite3.connect(MARKER)\n"
        "connection.execute('create table t (x)')\nconnection.close()\n"
    ),
    "asyncio.create_subprocess_exec": live(
        """\
        import asyncio
        async def main():
            process = await asyncio.create_subprocess_exec("touch", MARKER)
            await process.wait()
        asyncio.run(main())
        """
    ),
    "webbrowser": static("import webbrowser\nwebbrowser.open('file:///etc/passwd')\n"),
    "logging.FileHandler": live("import logging\nlogging.FileHandler(MARKER).close()\n"),
    "zipfile": live('import zipfile\nzipfile.ZipFile(MARKER, "w").close()\n'),
    "tarfile": live('import tarfile\ntarfile.open(MARKER, "w").close()\n'),
    "code.InteractiveInterpreter": live(
        "import code\ncode.InteractiveInterpreter({'M': MARKER}).runsource(\"open(M, 'w').close()\")\n"
    ),
    "urllib.request": live('import urllib.request\nurllib.request.urlretrieve("file://" + SECRET, MARKER)\n'),
    "linecache reads a file": live("import linecache\nLEAK = linecache.getline(SECRET, 1)\n"),
    "trio.lowlevel.open_process": live(
        """\
        import trio
        async def main():
            process = await trio.lowlevel.open_process(["touch", MARKER])
            await process.wait()
        trio.run(main)
        """
    ),
    "trio.to_thread outside the store": static("import trio\nrunner = trio.to_thread.run_sync\n"),
    "trio.socket": static("import trio\nlistener = trio.socket.socket()\n"),
    "trio.open_tcp_stream": static("import trio\nconnect = trio.open_tcp_stream\n"),
    "trio.serve_tcp": static("import trio\nserve = trio.serve_tcp\n"),
    "pickle.loads": live(
        'import pickle\npickle.loads(("cbuiltins\\nopen\\n(V" + MARKER + "\\nVw\\ntR.").encode())\n'
    ),
    "marshal.loads": static("import marshal\ncode = marshal.loads(b'')\n"),
    "shutil": live("import shutil\nshutil.copyfile(SECRET, MARKER)\n"),
    "tempfile": static("import tempfile\nhandle = tempfile.TemporaryFile()\n"),
    "gc.get_objects": static("import gc\neverything = gc.get_objects()\n"),
    # -- the project's own adapters and outer code
    "harness_workspace.local": live(
        """\
        import trio
        from harness_workspace.local import LocalWorkspace
        trio.run(LocalWorkspace(DIR).write_file, NAME, "x")
        """
    ),
    "harness_workspace.local reached as an attribute": live(
        """\
        import trio
        import harness_workspace
        import harness_workspace.local
        trio.run(harness_workspace.local.LocalWorkspace(DIR).write_file, NAME, "x")
        """
    ),
    "a private module of harness_workspace": static("from harness_workspace import _local_process\n"),
    "declaring a workspace isolated": static(
        "from harness_workspace import MemoryWorkspace, declare_isolation\n"
        "declare_isolation(MemoryWorkspace(), 'sandboxed')\n"
    ),
    "declaring a workspace isolated through the package": static(
        "import harness_workspace\nharness_workspace.declare_isolation(object(), 'unsafe-host')\n"
    ),
    "agent_server": static("import agent_server\n"),
    "harness_models (the network adapter)": static("from harness_models import ModelError\n"),
    "httpx": static("import httpx\nclient = httpx.AsyncClient()\n"),
    "urllib.request.urlopen to a loopback server": static(
        "from urllib.request import urlopen\nurlopen('http://127.0.0.1:9/')\n"
    ),
    "http.client": static("import http.client\nhttp.client.HTTPConnection('127.0.0.1')\n"),
    "ssl": static("import ssl\ncontext = ssl.create_default_context()\n"),
    "harness_exit_gate": static("import harness_exit_gate\n"),
    "a relative import out of a shim package": static(
        "from .local import LocalWorkspace\n", "packages/kernel/src/harness_workspace/_shim.py"
    ),
    "a relative import above the top package": static("from .. import harness_workspace\n"),
    # -- typing's forward references: a string kept by a typing subscript is code for later
    "forward reference: the review's own spelling": static(
        "import typing\n"
        "typing.get_args(typing.List[\"__import__('os').system('id')\"])[0]._evaluate({}, {}, frozenset())\n"
    ),
    "forward reference: typing.get_args(typing.List[…])[0]._evaluate": live(
        "import typing\n"
        f"typing.get_args(typing.List[{RUN_IN_FORWARD_REFERENCE}])[0]._evaluate({FORWARD_GLOBALS})\n"
    ),
    "forward reference: get_args(List[…])[0]._evaluate, names imported": live(
        "from typing import List, get_args\n"
        f"get_args(List[{RUN_IN_FORWARD_REFERENCE}])[0]._evaluate({FORWARD_GLOBALS})\n"
    ),
    "forward reference: typing.List[…].__args__[0]._evaluate": live(
        f"import typing\ntyping.List[{RUN_IN_FORWARD_REFERENCE}].__args__[0]._evaluate({FORWARD_GLOBALS})\n"
    ),
    "forward reference: the second argument of typing.Dict[str, …]": live(
        "import typing\n"
        f"ref = typing.get_args(typing.Dict[str, {RUN_IN_FORWARD_REFERENCE}])[1]\n"
        f"ref._evaluate({FORWARD_GLOBALS})\n"
    ),
    "forward reference: typing imported under another name": live(
        "import typing as t\n"
        f"t.get_args(t.Optional[{RUN_IN_FORWARD_REFERENCE}])[0]._evaluate({FORWARD_GLOBALS})\n"
    ),
    "forward reference: getattr with a constant name": live(
        "import typing\n"
        f"ref = typing.get_args(typing.List[{RUN_IN_FORWARD_REFERENCE}])[0]\n"
        f"getattr(ref, '_evaluate')({FORWARD_GLOBALS})\n"
    ),
    "forward reference: operator.attrgetter": live(
        "import operator\nimport typing\n"
        f"ref = typing.get_args(typing.List[{RUN_IN_FORWARD_REFERENCE}])[0]\n"
        f"operator.attrgetter('_evaluate')(ref)({FORWARD_GLOBALS})\n"
    ),
    "forward reference: __getattribute__ with a constant name": live(
        "import typing\n"
        f"ref = typing.get_args(typing.List[{RUN_IN_FORWARD_REFERENCE}])[0]\n"
        f"ref.__getattribute__('_evaluate')({FORWARD_GLOBALS})\n"
    ),
    "forward reference: a match keyword reads the method": live(
        f"""\
        import typing
        match typing.get_args(typing.List[{RUN_IN_FORWARD_REFERENCE}])[0]:
            case object(_evaluate=run):
                run({FORWARD_GLOBALS})
        """
    ),
    "forward reference: the subscript spelled as __class_getitem__": live(
        f"ref = list.__class_getitem__({RUN_IN_FORWARD_REFERENCE}).__args__[0]\n"
        "import typing\n"
        "typing.get_args(typing.List[ref])[0]._evaluate({'MARKER': MARKER}, {}, frozenset())\n"
    ),
    "forward reference: a generic class of the module": live(
        f"""\
        import typing
        T = typing.TypeVar("T")
        class Box(typing.Generic[T]):
            pass
        typing.get_args(Box[{RUN_IN_FORWARD_REFERENCE}])[0]._evaluate({FORWARD_GLOBALS})
        """
    ),
    "forward reference: a type alias a Struct field uses": live(
        f"""\
        import typing
        import msgspec
        Hidden = typing.Optional[{RUN_IN_FORWARD_REFERENCE}]
        class Carrier(msgspec.Struct):
            field: Hidden
        msgspec.convert({{"field": 1}}, Carrier)
        """
    ),
    "forward reference: a builtin generic alias a Struct field uses": live(
        f"""\
        import msgspec
        Hidden = list[{RUN_IN_FORWARD_REFERENCE}]
        class Carrier(msgspec.Struct):
            field: Hidden
        msgspec.convert({{"field": [1]}}, Carrier)
        """
    ),
    "forward reference: an alias of an alias, the string in a name": live(
        f"""\
        import typing
        import msgspec
        Text = {RUN_IN_FORWARD_REFERENCE}
        Inner = typing.List[Text]
        Outer = Inner
        class Carrier(msgspec.Struct):
            field: Outer
        msgspec.convert({{"field": [1]}}, Carrier)
        """
    ),
    "forward reference: an annotation string computed at run time": live(
        """\
        import msgspec
        Hidden = "open(MARKER, " + "'w').close() or int"
        class Carrier(msgspec.Struct):
            field: Hidden
        msgspec.convert({"field": 1}, Carrier)
        """
    ),
    "forward reference: an annotation string joined at run time": live(
        """\
        import msgspec
        Hidden = "".join(["open(MARKER, ", "'w').close() or int"])
        class Carrier(msgspec.Struct):
            field: Hidden
        msgspec.convert({"field": 1}, Carrier)
        """
    ),
    "forward reference: __forward_arg__": static(
        "import typing\ntext = typing.get_args(typing.List['int'])[0].__forward_arg__\n"
    ),
    "forward reference: __forward_code__": static(
        "import typing\ncode = typing.get_args(typing.List['int'])[0].__forward_code__\n"
    ),
    "forward reference: typing.ForwardRef(…)._evaluate": live(
        f"import typing\ntyping.ForwardRef({RUN_IN_FORWARD_REFERENCE})._evaluate({FORWARD_GLOBALS})\n"
    ),
    "forward reference: ForwardRef imported": live(
        "from typing import ForwardRef\n"
        f"ForwardRef({RUN_IN_FORWARD_REFERENCE})._evaluate({FORWARD_GLOBALS})\n"
    ),
    "forward reference: typing._eval_type": live(
        "import typing\n"
        f"typing._eval_type(typing.List[{RUN_IN_FORWARD_REFERENCE}], {{'MARKER': MARKER}}, {{}})\n"
    ),
    "forward reference: get_type_hints of a class with a string annotation": live(
        f"""\
        import typing
        class Carrier:
            field: {RUN_IN_FORWARD_REFERENCE}
        typing.get_type_hints(Carrier)
        """
    ),
    "forward reference: vars of the reference": static(
        "import typing\ncode = vars(typing.get_args(typing.List['int'])[0])['__forward_code__']\n"
    ),
    # -- the kernel's own host adapters are for composition roots
    "the SQLite store named from kernel code": static(
        "from harness_kernel.store import SqliteSessionStore\nstore = SqliteSessionStore('/tmp/x.db')\n"
    ),
    "the SQLite store through its private module": static(
        "from harness_kernel.store._sqlite import SqliteSessionStore\n"
    ),
    "the SQLite store as an attribute of its package": static(
        "from harness_kernel import store\nopened = store.SqliteSessionStore('/tmp/x.db')\n"
    ),
    "the SQLite store by getattr on its package": static(
        "from harness_kernel import store\nopened = getattr(store, 'SqliteSessionStore')('/tmp/x.db')\n"
    ),
    "the SQLite store by a relative import": static(
        "from ..store import SqliteSessionStore\n", f"{KERNEL_PACKAGE}/runtime/_evasion.py"
    ),
    "the SQLite connection helper": static(
        "from harness_kernel.store._schema import connect_store\nconnect_store('/tmp/x.db', 'full')\n"
    ),
    "the SQLite store named from tools code": static(
        "from harness_kernel.store import SqliteSessionStore\n",
        "packages/tools/src/harness_tools/_evasion.py",
    ),
}


def check(tmp_path: Path, relative: str, content: bytes) -> list[Finding]:
    """Write one file into a copy of the kernel's layout and check it as the repository does."""
    location = tmp_path / relative
    location.parent.mkdir(parents=True, exist_ok=True)
    location.write_bytes(content)
    config = dataclasses.replace(load_config(REPOSITORY / "pyproject.toml"), root=tmp_path, jobs=1)
    return check_paths([], config)


def flagged(findings: list[Finding]) -> bool:
    return any(finding.rule in FLAGGING_RULES and finding.severity == "error" for finding in findings)


@pytest.mark.parametrize(("source", "path"), [(form.source, form.path) for form in FORMS.values()], ids=FORMS)
def test_every_source_form_of_the_corpus_is_flagged(tmp_path: Path, source: str, path: str) -> None:
    findings = check(tmp_path, path, source.encode())

    assert flagged(findings), findings


def write_sourceless_bytecode(package: Path) -> None:
    code = compile("open('/tmp/x', 'w')\n", "_evasion.py", "exec")
    (package / "_evasion.pyc").write_bytes(importlib.util.MAGIC_NUMBER + bytes(12) + marshal.dumps(code))


def write_orphan_cached_bytecode(package: Path) -> None:
    (package / "__pycache__").mkdir()
    (package / "__pycache__/_ghost.cpython-311.pyc").write_bytes(importlib.util.MAGIC_NUMBER + bytes(12))


def write_unchecked_hash_bytecode(package: Path) -> None:
    (package / "_clean.py").write_text("x = 1\n", encoding="utf-8")
    (package / "__pycache__").mkdir()
    flags = (1).to_bytes(4, "little")  # hash-based, never checked against the source
    (package / "__pycache__/_clean.cpython-311.pyc").write_bytes(
        importlib.util.MAGIC_NUMBER + flags + bytes(8)
    )


def write_extension_module(package: Path) -> None:
    (package / "_native.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF")


def write_path_file(package: Path) -> None:
    (package / "evil.pth").write_text("import os; os.system('id')\n", encoding="utf-8")


def write_zip_archive(package: Path) -> None:
    with zipfile.ZipFile(package / "bundle.pyz", "w") as archive:
        archive.writestr("__main__.py", "import os\n")


FILE_FORMS: Final[dict[str, Callable[[Path], None]]] = {
    "a sourceless .pyc beside the sources": write_sourceless_bytecode,
    "a cached .pyc without its source": write_orphan_cached_bytecode,
    "an unchecked hash-based .pyc": write_unchecked_hash_bytecode,
    "an extension module": write_extension_module,
    "a .pth file": write_path_file,
    "a zip application": write_zip_archive,
}


@pytest.mark.parametrize("write", list(FILE_FORMS.values()), ids=FILE_FORMS)
def test_every_file_form_of_the_corpus_is_flagged(tmp_path: Path, write: Callable[[Path], None]) -> None:
    package = tmp_path / KERNEL_PACKAGE
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('"""A kernel package."""\n', encoding="utf-8")
    write(package)
    config = dataclasses.replace(load_config(REPOSITORY / "pyproject.toml"), root=tmp_path, jobs=1)

    findings = check_paths([], config)

    assert flagged(findings), findings


LIVE_RUNNER: Final = textwrap.dedent(
    """
    import builtins, json, os, sys, types
    request = json.load(sys.stdin)
    outcome = {}
    for index, case in enumerate(request):
        # A registered module, so that what evaluates annotations finds its globals.
        module = types.ModuleType(f"harness_kernel_evasion_{index}")
        sys.modules[module.__name__] = module
        namespace = module.__dict__
        namespace.update(
            __builtins__=builtins.__dict__,
            MARKER=case["marker"],
            DIR=os.path.dirname(case["marker"]),
            NAME=os.path.basename(case["marker"]),
            SECRET=case["secret"],
        )
        error = None
        try:
            exec(compile(case["source"], "<" + case["id"] + ">", "exec"), namespace)
        except BaseException as failure:
            error = repr(failure)
        outcome[case["id"]] = {
            "created": os.path.exists(case["marker"]),
            "leak": namespace.get("LEAK"),
            "error": error,
        }
    print(json.dumps(outcome))
    """
)


@pytest.fixture(scope="module")
def live_outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, object]]:
    """Run every live form once, each with its own marker, in one child interpreter."""
    folder = tmp_path_factory.mktemp("evasion-live")
    secret = folder / "secret.txt"
    secret.write_text(SECRET_TEXT, encoding="utf-8")
    request = [
        {"id": name, "source": form.source, "marker": str(folder / f"marker-{index}"), "secret": str(secret)}
        for index, (name, form) in enumerate(FORMS.items())
        if form.live
    ]
    completed = subprocess.run(
        [sys.executable, "-c", LIVE_RUNNER],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        cwd=folder,
        timeout=120,
        check=True,
    )
    outcomes: dict[str, dict[str, object]] = json.loads(completed.stdout.splitlines()[-1])
    return outcomes


@pytest.mark.slow
@pytest.mark.parametrize("name", [name for name, form in FORMS.items() if form.live])
def test_the_live_forms_really_reach_the_host(name: str, live_outcomes: dict[str, dict[str, object]]) -> None:
    outcome = live_outcomes[name]

    assert outcome["created"] or outcome["leak"] == SECRET_TEXT, outcome

"""Load and failure scenarios of the agent server (spec §10): figures and one verdict per expectation.

Run by hand (it is not a test): ``uv run python benchmarks/agent_server_load.py [--quick]``.
``--phases levels`` (or any comma-separated choice of the phases below) runs only those.
``--clients processes`` (the default) runs the levels' sessions in ``--client-processes``
worker processes (default 1) against a server subprocess of its own, so the figures are the
server's; ``--clients in-process`` runs them beside the server in this process's trio thread,
as the benchmark did before (issue #21); ``--clients processes,in-process`` runs both passes and
compares them. ``--profile PATH`` runs the levels phase alone (one level, 100 sessions or 20
with ``--quick``, unless ``--levels`` says otherwise) with the server under cProfile and writes
the sorted profile (pstats text: top 60 by cumulative time, by own time, and the project's code
by own time) to PATH; with the clients in processes the profile is the server's alone.
``--flame PATH`` samples the levels' server subprocess with py-spy (on PATH; not a project
dependency) and writes its flame graph. ``--store postgres`` (with ``--clients processes``)
runs the levels against ``--replicas N`` server subprocesses (default 1) sharing one
PostgreSQL database, a throwaway cluster started here with durable commits (or
``--database-url``), each session on one replica, round robin; per level it adds each
replica's CPU and peak RSS and the cluster's CPU. ``--store sqlite,postgres --replicas 1,2``
runs one pass per store and count in one invocation, SQLite first, and compares them.
Loopback only; every phase is bounded by ``--timeout`` seconds and the script stops by itself.
It exits 1 when an expectation fails; issue #21's figures for the server are printed as
targets, met or missed, and never fail the run.

Phases:

1. **levels** (SQLite store in a temporary directory, scripted FakeModel, the ``echo`` tool):
   1, 100 and 500 concurrent sessions, one level after another (the level of one session 50
   times in a row, ``--lone-rounds``: one prompt is one sample). Each session connects,
   initialises, creates a session and runs a short prompt; one in eight calls ``echo``, which
   asks (no manifest), so it makes a permission round trip. Per session the streamed ``seq``
   must be contiguous and a restore from -1 must return exactly the streamed events. Reports
   sessions/s, p50/p99 prompt round trip, and per level the peak RSS (``VmHWM``, reset before
   each level) and CPU time of the server subprocess (of this process, client and server
   together, with ``--clients in-process``) and the client workers' CPU time. In-process, the
   levels run after idle, against the in-process server of phases 2 and 3.
2. **idle**: RSS per idle initialised connection.
3. **mixed**: a baseline of plain sessions alone, then the same sessions mixed with offending
   connections (non-JSON, binary, invalid UTF-8, oversized, over-fragmented messages, bad
   handshakes, half frames, slow request heads). Each offender must end with its documented
   status or close code, ``/health`` must answer, and the sessions' p50 must stay within 2x
   the baseline. Half frames take the server's 30 s incomplete-frame timeout, slow heads 10 s.
4. **stalled** (a fresh server subprocess with a ``run`` seam whose runs stream 32 events of
   64 KiB, then wait): control connections run that workload and read normally; then as many
   clients run it and stop reading mid-prompt. Each stalled client must be closed with 1013
   (then aborted); the server's RSS per stalled connection beyond a control, while stalled and
   after ``malloc_trim``, must stay under the outbound cap (spec §10; the server keeps its queue
   plus the one message waiting for room within the cap), must be mostly released after the
   closes (what stays is at most a quarter of the stalled growth: allocator arenas, not a leak
   that pins the queue), and every committed event must be restorable. When the cap is
   exceeded, a second pass under tracemalloc prints where the memory was allocated.
5. **cycles** (server in a subprocess, so its descriptors are counted honestly from
   ``/proc/<pid>/fd``): 10 000 connect/initialize/close cycles (every tenth also creates a
   session, canceled at disconnect). Descriptors and active store rows return to baseline.
   The trio task count is measured on the in-process server of phases 2 and 3 over a smaller
   run.
6. **sigterm** (subprocess): sessions in flight, SIGTERM; every client sees 1001 or its
   completed response within 10 s, the process exits 0, and the store passes
   ``PRAGMA integrity_check`` and opens cleanly.

Two phases run between those: **tasks** (after mixed: the trio task count of phase 5) and
**flood** (after stalled: 1 100 idle sockets that never send a request, against a server
subprocess limited to 1 024 descriptors; a client must still get in within 1 s).

500 sessions plus idle connections need ``ulimit -n`` above about 1 300; the script raises the
soft limit to the hard one. This file is the entry point; the phases live in
``benchmarks/server_load/``, one module each, beside the shared clients, server process and
verdicts.
"""

from server_load import main

if __name__ == "__main__":
    main(__doc__.splitlines()[0] if __doc__ else None)

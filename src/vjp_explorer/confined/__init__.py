"""Run a snippet as real Python in a child process the operating system confines (docs/confinement.md).

The parent calls `launch.run_confined`; the child (`child.py`) confines itself (`sandbox.confine`:
rlimits, no privileges, Landlock, seccomp) before it reads a byte of the snippet, then runs it
(`runner.run`), the only exec of a user's code in the project besides trusted.py's door.
"""

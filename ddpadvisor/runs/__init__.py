"""Runs under ``python -m torch.distributed.run``: the one place that launches and ends them.

``command`` builds torchrun's command line; ``supervise`` owns the process tree (it starts
torchrun under ``reaper.py``, enforces the deadline, reacts to SIGINT/SIGTERM/SIGHUP and kills
every process of the run); ``outcome`` reads torchrun's failure report and tells a crash in
interpreter teardown from a real failure. The probe and trace launchers build on these.
Nothing here imports torch.
"""

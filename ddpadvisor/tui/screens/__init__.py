"""One screen per mode of the session: diagnose, evidence, run, results, fix, export."""

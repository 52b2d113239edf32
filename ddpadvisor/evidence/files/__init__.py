"""Files the user already has, read for facts: training logs, configs, environment dumps.

``--attach FILE`` (kind detected from the content, or named: ``--attach KIND:FILE``) and
``--reference-log FILE`` (an earlier, good run, compared with the attached logs). Modules:
``text`` (bounded reading, binary and size checks), ``curve`` (a logged run's series and the
robust statistics that measure its loss pattern), ``logs`` (trainer_state.json, printed dicts,
metrics CSVs, JSON-lines metrics, plain text logs), ``tensorboard`` (event files and log
folders, by a bounded TFRecord and protobuf reader of its own), ``configs`` (DeepSpeed JSON, accelerate
YAML, TrainingArguments, the launch command), ``envdump`` (collect_env, pip, nvidia-smi,
accelerate env, NCCL variables), ``detect`` (which reader a file's content calls for) and
``facts`` (findings -> observations, the reference comparison).

Standard library only; a file's text is never echoed: warnings name the file, the line and
what was wrong.
"""

"""Self-optimizing: merge change data and small files into target-size base files.

The flow is one-way, as everywhere in arctic-sql (DESIGN "Self-optimizing"):

- ``evaluator``: per partition, classify files (fragments, undersized segments, segments) and decide
  from the triggers whether minor, major or full optimizing is due. Metadata only.
- ``planner``: pure Python over file lists: disjoint subtrees of the key tree, key-range groups,
  one task per target node, an input budget. No Spark.
- ``executor``: each task is one Spark job that merges by the merge rule and writes base files under
  the process's own folder. It never commits.
- ``committer``: one atomic base-store commit per plan with the new watermarks; a partition whose
  inputs or watermark moved since planning is dropped, never committed blindly.
- ``process``: runs a plan end to end and records it (``state``: ``db.t.optimizing``).
- ``service``: the long-running ``arctic-sql optimizer`` with quota and balanced scheduling.
"""

"""The optimizing planner: from a partition's files to tasks. Pure Python; no Spark, no I/O.

Per partition (DESIGN "Planning"):

1. Base files are written at the *write level*: the tree level of ``base.file-index.hash-bucket``.
   Each file's node is either at or below that level (it belongs to one target node, its ancestor
   there) or above it (an *upper* file: its rows spread over every target node below it).
2. The non-empty nodes form disjoint subtrees (a pre-order walk keeps each node whose ancestors are
   all empty as a subtree root). A subtree rooted above the write level makes every target node
   under it a task and assigns its upper files down to each: the task keeps only its own node's
   rows, so every input row is written by exactly one task and no two tasks write one file.
3. Inside a target node, files whose key ranges overlap are grouped (union-find). A group with
   change data or an upper file must be rewritten (the new watermark hides every change file of the
   partition); which other groups are rewritten depends on the mode. One task per target node.

Across partitions, a plan takes change files in transaction order up to ``max-file-count`` (the
watermark advances to the last one taken) and stops adding partitions once the input budget is
spent (at least one partition always goes).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from arctic_sql.optimizer.evaluator import FULL, MAJOR, MINOR, classify, duplicate_ratio
from arctic_sql.optimizer.inputs import PlanFile, Settings, overlaps
from arctic_sql.table.format.tree import DataTreeNode


@dataclass(frozen=True)
class Task:
    """One Spark job: merge these files and write the rows of ``target_node`` (None: no tree)."""

    partition: str
    target_node: int | None
    base_files: tuple[PlanFile, ...]
    change_files: tuple[PlanFile, ...]
    has_upper_files: bool = False  # some inputs lie above the target node: keep only its rows
    # Base files left in place: the rows the changes supersede get position deletes (minor, major).
    kept_files: tuple[PlanFile, ...] = ()
    # Write the rows in the table's clustering order instead of key order (major and full).
    ordered: bool = False

    @property
    def input_files(self) -> tuple[PlanFile, ...]:
        return self.base_files + self.change_files + self.kept_files

    @property
    def input_bytes(self) -> int:
        return sum(f.file_size for f in self.input_files)


def unique_inputs(tasks: list[Task], kind: str) -> list[PlanFile]:
    """The tasks' ``base_files`` or ``change_files``, each once: an upper file is an input of every
    task under it."""
    return list({f.path: f for task in tasks for f in getattr(task, kind)}.values())


@dataclass
class PartitionPlan:
    partition: str
    mode: str
    reason: str
    tasks: list[Task]
    from_watermark: int  # the partition's watermark when planned
    to_watermark: int  # the watermark after commit: the newest change transaction merged

    @property
    def rewritten_base(self) -> list[PlanFile]:
        """Base files the commit removes (an upper file assigned to several tasks counts once)."""
        return unique_inputs(self.tasks, "base_files")

    @property
    def change_inputs(self) -> list[PlanFile]:
        return unique_inputs(self.tasks, "change_files")

    @property
    def kept_base(self) -> list[PlanFile]:
        """Base files the commit keeps, with new position deletes for the rows the changes hit."""
        return unique_inputs(self.tasks, "kept_files")

    @property
    def input_files_count(self) -> int:
        return len(self.rewritten_base) + len(self.change_inputs) + len(self.kept_base)

    @property
    def input_bytes(self) -> int:
        return sum(f.file_size for f in [*self.rewritten_base, *self.change_inputs, *self.kept_base])


def take_change_prefix(change: list[PlanFile], max_files: int) -> tuple[list[PlanFile], int | None]:
    """The change files of the oldest transactions that fit in ``max_files`` (whole transactions
    only, at least one), and the newest transaction taken."""
    by_txn: dict[int, list[PlanFile]] = defaultdict(list)
    for f in change:
        by_txn[f.sequence_number].append(f)
    taken: list[PlanFile] = []
    last = None
    for txn in sorted(by_txn):
        if taken and len(taken) + len(by_txn[txn]) > max_files:
            break
        taken.extend(by_txn[txn])
        last = txn
    return taken, last


def subtree_roots(nodes: Iterable[DataTreeNode]) -> list[DataTreeNode]:
    """The non-empty nodes none of whose ancestors is non-empty, in pre-order."""
    present = set(nodes)
    roots = []
    for node in sorted(present, key=_preorder_key):
        ancestor, is_root = node, True
        while ancestor.mask:
            ancestor = ancestor.parent()
            if ancestor in present:
                is_root = False
                break
        if is_root:
            roots.append(node)
    return roots


def _preorder_key(node: DataTreeNode) -> tuple[int, ...]:
    """Sort key of a pre-order walk: the path of left (0) / right (1) turns from the root."""
    return tuple((node.index >> bit) & 1 for bit in range(node.level))


def _at_level(node: DataTreeNode, level: int) -> list[DataTreeNode]:
    """``node``'s ancestor at ``level``, or all its descendants there."""
    if node.level >= level:
        mask = (1 << level) - 1
        return [DataTreeNode(mask, node.index & mask)]
    found = [node]
    while found[0].level < level:
        found = [child for n in found for child in n.children()]
    return found


def _groups(files: list[PlanFile]) -> list[list[PlanFile]]:
    """Files grouped so that files with overlapping key ranges share a group (union-find)."""
    parent = list(range(len(files)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(len(files)):
        for j in range(i + 1, len(files)):
            if overlaps(files[i], files[j]):
                parent[find(i)] = find(j)
    grouped: dict[int, list[PlanFile]] = defaultdict(list)
    for i, f in enumerate(files):
        grouped[find(i)].append(f)
    return list(grouped.values())


_SMALL: dict[str, tuple[str, ...]] = {MINOR: ("fragment",), MAJOR: ("fragment", "undersized")}


def _chosen_groups(
    groups: list[list[PlanFile]], upper: set[str], mode: str, settings: Settings
) -> list[list[PlanFile]]:
    """The key-range groups of one target node that ``mode`` rewrites.

    A group with change data or an upper file must be rewritten (the new watermark hides its change
    data; an upper file is rewritten whole). Minor and major also compact the node's small files
    (fragments; for major undersized segments too) once there are two of them, even when their key
    ranges are disjoint (increasing keys). Full rewrites all but a lone clean segment (all of them on a clustered table).
    """
    must = [g for g in groups if any(f.is_change or f.path in upper for f in g)]
    if mode == FULL:
        return [
            g
            for g in groups
            if g in must
            or len(g) >= 2
            or classify(g[0], settings) != "segment"
            or g[0].deletes
            or settings.clustered  # a lone segment may be in key order: sorted with its node
        ]
    if mode == MAJOR:  # segments whose position deletes passed the duplicate ratio
        must += [
            g
            for g in groups
            if g not in must
            and any(f.deleted_rows > settings.major_duplicate_ratio * max(1, f.record_count) for f in g)
        ]
    small = [g for g in groups if any(classify(f, settings) in _SMALL[mode] for f in g if not f.is_change)]
    small_files = sum(
        1 for g in small for f in g if not f.is_change and classify(f, settings) in _SMALL[mode]
    )
    if small_files < 2:
        return must
    return [g for g in groups if g in must or g in small]


def plan_partition(
    partition: str, base: list[PlanFile], change: list[PlanFile], mode: str, settings: Settings
) -> list[Task]:
    """The tasks that optimize one partition in ``mode``; ``change`` are the change files to merge."""
    if mode not in (MINOR, MAJOR, FULL):
        raise ValueError(f"unknown optimizing mode {mode}")
    files = [*base, *change]
    if not settings.keyed:
        return _plan_unkeyed(partition, base, mode, settings)
    level = settings.write_level
    by_target: dict[DataTreeNode, list[PlanFile]] = defaultdict(list)
    upper: set[str] = set()
    by_node: dict[DataTreeNode, list[PlanFile]] = defaultdict(list)
    for f in files:
        by_node[f.node].append(f)
    for root in subtree_roots(by_node):
        members = [f for node, fs in by_node.items() if node.is_descendant_of(root) for f in fs]
        for f in members:
            targets = _at_level(f.node, level)
            if len(targets) > 1 or f.node.level < level:
                upper.add(f.path)
            for target in targets:
                by_target[target].append(f)
    tasks = []
    for target in sorted(by_target, key=lambda n: n.id):
        chosen = [f for g in _chosen_groups(_groups(by_target[target]), upper, mode, settings) for f in g]
        if not chosen:
            continue
        has_upper = any(f.path in upper for f in chosen)
        base_files = [f for f in chosen if not f.is_change]
        change_files = [f for f in chosen if f.is_change]
        kept = _kept(base_files, base, change, mode, settings) if not has_upper else []
        if not change_files:  # nothing supersedes their rows: they are no input at all
            base_files = [f for f in base_files if f not in kept]
            kept = []
            if not base_files:
                continue
        elif sum(f.file_size for f in chosen) > settings.in_memory_max_bytes:
            kept = []  # a task merged by a Spark query rewrites its files whole
        base_files = [f for f in base_files if f not in kept]
        tasks.append(
            Task(
                partition=partition,
                target_node=target.id,
                base_files=tuple(base_files),
                change_files=tuple(change_files),
                has_upper_files=has_upper,
                kept_files=tuple(kept),
                ordered=settings.clustered and mode in (MAJOR, FULL),
            )
        )
    return tasks


def _kept(
    chosen: list[PlanFile], base: list[PlanFile], change: list[PlanFile], mode: str, settings: Settings
) -> list[PlanFile]:
    """The chosen base files that minor or major leaves in place with position deletes for the rows
    the changes supersede, as Amoro does: write cost follows the changes, not the files they touch.
    Minor keeps every file past fragment size; major only segments whose garbage (deleted and
    superseded rows) stays within ``major.trigger.duplicate-ratio``. Full keeps nothing."""
    if mode == FULL:
        return []
    kept = []
    for f in chosen:
        kind = classify(f, settings)
        if mode == MINOR and kind != "fragment":
            kept.append(f)
        elif (
            mode == MAJOR
            and kind == "segment"
            and duplicate_ratio(f, base, change) <= settings.major_duplicate_ratio
        ):
            kept.append(f)
    return kept


def _plan_unkeyed(partition: str, base: list[PlanFile], mode: str, settings: Settings) -> list[Task]:
    """A table without a key has no tree and no change data: bin-pack the files the mode takes."""
    kinds = {f.path: classify(f, settings) for f in base}
    taken: dict[str, tuple[str, ...]] = {
        MINOR: ("fragment",),
        MAJOR: ("fragment", "undersized"),
        FULL: ("fragment", "undersized", "segment"),
    }
    chosen = sorted((f for f in base if kinds[f.path] in taken[mode]), key=lambda f: f.path)
    if len(chosen) < 2:
        return []
    bins: list[list[PlanFile]] = [[]]
    for f in chosen:  # Iceberg's bin packing would do as well; inputs of one bin stay together
        if bins[-1] and sum(x.file_size for x in bins[-1]) + f.file_size > settings.target_size:
            bins.append([])
        bins[-1].append(f)
    return [Task(partition, None, tuple(b), ()) for b in bins if len(b) >= 2 or mode == FULL and b]


@dataclass
class PartitionInput:
    """A partition's live files at planning time, and the mode it should get."""

    partition: str
    mode: str
    reason: str
    base: list[PlanFile]
    change: list[PlanFile]  # above the watermark
    watermark: int


@dataclass
class Plan:
    partitions: list[PartitionPlan] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # partitions left for a later run (budget)

    @property
    def input_bytes(self) -> int:
        return sum(p.input_bytes for p in self.partitions)


def plan(inputs: list[PartitionInput], settings: Settings, budget_bytes: int | None = None) -> Plan:
    """Plan partitions, costliest first, until the input budget is spent."""
    result = Plan()
    candidates = []
    for p in inputs:
        change, last_txn = take_change_prefix(p.change, settings.max_file_count)
        tasks = plan_partition(p.partition, p.base, change, p.mode, settings)
        if tasks:
            to = max(p.watermark, last_txn) if last_txn is not None else p.watermark
            candidates.append(PartitionPlan(p.partition, p.mode, p.reason, tasks, p.watermark, to))
    spent = 0
    for candidate in sorted(candidates, key=lambda c: (-c.input_bytes, c.partition)):
        if budget_bytes is not None and result.partitions and spent + candidate.input_bytes > budget_bytes:
            result.skipped.append(candidate.partition)
            continue
        result.partitions.append(candidate)
        spent += candidate.input_bytes
    result.partitions.sort(key=lambda c: c.partition)
    return result

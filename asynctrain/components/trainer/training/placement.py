"""Where a strategy-built model's variables live, and how a train step touches them.

Under ParameterServerStrategy the variable partitioner (`connection.make_partitioner`) splits each
variable along its first axis into shards, each on one parameter server; Keras then sees the
shards (`model.variables` lists `embeddings/part_0`, `part_1`...), and the optimizer gathers the
slots it creates for them back into one `ShardedVariable` per slot (tf_keras 2.16,
`Optimizer.add_variable_from_reference`), placed shard by shard next to the model's.

- `model_placement` / `optimizer_placement`: each variable with its shards (device, rows, bytes):
  what tests and the pipeline's end-to-end test assert (no task holds a whole embedding table),
  and what `training_report.json` records under `placement` (`report`).
- `bytes_per_task`: the variable bytes each parameter server holds.
- `access_ops`: the op types by which a traced train function reads or writes each variable. An
  embedding table must be touched only by `SPARSE_OPS` (`ResourceGather` for the rows a batch
  looks up, `ResourceScatter*` for their update): these run on the parameter server that holds
  the shard, so only the touched rows travel. With the default Adagrad (and SGD) that holds for
  the tables and their slots. Adam does not: tf_keras's Adam decays every row of its `m` and `v`
  slots at every step (`ReadVariableOp`, `AssignAddVariableOp` on the whole slot) and applies
  the update to the whole table, so a step moves whole tables; use it only for small tables.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import tensorflow as tf

# The ops that touch only the rows a batch names, run where the variable lives.
SPARSE_OPS = frozenset(
    {
        'ResourceGather',
        'ResourceScatterAdd',
        'ResourceScatterSub',
        'ResourceScatterMul',
        'ResourceScatterDiv',
        'ResourceScatterMin',
        'ResourceScatterMax',
        'ResourceScatterUpdate',
        'ResourceSparseApplyAdagrad',
        'ResourceSparseApplyAdagradV2',
        'ResourceSparseApplyAdam',
    }
)
# Ops that pass a variable's handle on to a function (the loop of `steps_per_execution` steps, a
# nested call), by the attribute that names the function.
_FUNCTION_ATTRIBUTES = {
    'While': 'body',
    'StatelessWhile': 'body',
    'StatefulPartitionedCall': 'f',
    'PartitionedCall': 'f',
}


@dataclasses.dataclass(frozen=True)
class Shard:
    """One piece of a variable.

    Attributes:
      device: The device holding it, e.g. `/job:ps/replica:0/task:1/device:CPU:0`.
      rows: Its length along the first axis (1 for a scalar).
      nbytes: Its size in bytes.
    """

    device: str
    rows: int
    nbytes: int

    @property
    def task(self) -> str:
        """The task holding it, without the device: `/job:ps/replica:0/task:1`."""
        return self.device.split('/device:')[0]


@dataclasses.dataclass(frozen=True)
class VariablePlacement:
    """A variable (sharded or whole) and where its shards are.

    Attributes:
      name: The variable's name without the `:0` suffix (`cat_embedding/embeddings`).
      shape: The whole variable's shape.
      shards: Its shards in order along the first axis; one for a variable kept whole.
    """

    name: str
    shape: tuple[int, ...]
    shards: tuple[Shard, ...]

    @property
    def rows(self) -> int:
        return self.shape[0] if self.shape else 1

    @property
    def tasks(self) -> frozenset[str]:
        return frozenset(s.task for s in self.shards)

    @property
    def largest_shard_rows(self) -> int:
        return max(s.rows for s in self.shards)

    def to_dict(self) -> dict:
        return {
            'name': self.name,
            'shape': list(self.shape),
            'shards': [dataclasses.asdict(s) for s in self.shards],
        }


def _strip_suffix(name: str) -> str:
    return name[: -len(':0')] if name.endswith(':0') else name


def sharded_name(variable) -> str:
    """A variable's name without `:0`; for a `ShardedVariable` (whose own name says only
    `ShardedVariable` when the optimizer built it), its first shard's without `/part_0`."""
    if isinstance(variable, tf.__internal__.distribute.ShardedVariable):
        return _strip_suffix(variable.variables[0].name).removesuffix('/part_0')
    return _strip_suffix(variable.name)


def _placement(variable, pieces: list) -> VariablePlacement:
    shards = tuple(
        Shard(
            device=piece.device,
            rows=int(piece.shape[0]) if piece.shape.rank else 1,
            nbytes=int(piece.shape.num_elements()) * piece.dtype.size,
        )
        for piece in pieces
    )
    return VariablePlacement(sharded_name(variable), tuple(int(d) for d in variable.shape), shards)


def variable_placements(variables: Iterable) -> list[VariablePlacement]:
    """Each variable of `variables` once, with its shards: a `ShardedVariable`, or the shards of
    one (grouped by the container they belong to), or a whole variable."""
    placements, seen = [], set()
    for variable in variables:
        container = getattr(variable, '_sharded_container', None)
        sharded = container() if container is not None else variable
        if isinstance(sharded, tf.__internal__.distribute.ShardedVariable):
            if id(sharded) in seen:
                continue
            seen.add(id(sharded))
            placements.append(_placement(sharded, list(sharded.variables)))
        else:
            placements.append(_placement(variable, [variable]))
    return placements


def model_placement(keras_model: tf.keras.Model) -> list[VariablePlacement]:
    """The model's variables and their shards."""
    return variable_placements(keras_model.variables)


def optimizer_placement(optimizer: tf.keras.optimizers.Optimizer) -> list[VariablePlacement]:
    """The optimizer's variables (step counter, slots) and their shards."""
    return variable_placements(optimizer.variables)


def bytes_per_task(placements: Iterable[VariablePlacement]) -> dict[str, int]:
    """Variable bytes held by each task."""
    totals: dict[str, int] = {}
    for placement in placements:
        for shard in placement.shards:
            totals[shard.task] = totals.get(shard.task, 0) + shard.nbytes
    return dict(sorted(totals.items()))


def report(keras_model: tf.keras.Model, optimizer: tf.keras.optimizers.Optimizer) -> dict:
    """The placement as JSON-ready data: `model` and `optimizer`, each a list of variables with
    their shards (device, rows, nbytes); `bytes_per_task` totals both."""
    model = model_placement(keras_model)
    slots = optimizer_placement(optimizer)
    return {
        'model': [p.to_dict() for p in model],
        'optimizer': [p.to_dict() for p in slots],
        'bytes_per_task': bytes_per_task([*model, *slots]),
    }


def access_ops(function, variables: Iterable) -> dict[str, frozenset[str]]:
    """The op types by which `function` (a `tf.function` with an input signature, or a concrete
    function) touches each of `variables`' shards, by shard name; following the handle into
    while loops and function calls. A shard the function does not capture is left out."""
    concrete = function if hasattr(function, 'graph') else function.get_concrete_function()
    graph = concrete.graph
    functions = {f.signature.name: f for f in graph.as_graph_def().library.function}
    shards = {}
    for placement_source in variables:
        for shard in getattr(placement_source, 'variables', [placement_source]):
            shards[shard.handle.ref()] = _strip_suffix(shard.name)
    found: dict[str, frozenset[str]] = {}
    for external, internal in graph.captures:
        name = shards.get(external.ref())
        if name is None:
            continue
        types: set[str] = set()
        for op in internal.consumers():
            if op.type in _FUNCTION_ATTRIBUTES:
                index = [t is internal for t in op.inputs].index(True)
                body = op.get_attr(_FUNCTION_ATTRIBUTES[op.type]).name
                types |= _argument_uses(functions, body, index)
            else:
                types.add(op.type)
        found[name] = frozenset(found.get(name, frozenset()) | types)
    return found


def _argument_uses(functions: dict, function_name: str, index: int) -> set[str]:
    """Op types that use argument `index` of a library function, through nested calls and
    `Identity` copies of it."""
    function = functions[function_name]
    frontier = {function.signature.input_arg[index].name}
    types: set[str] = set()
    while frontier:
        following = set()
        for node in function.node_def:
            for position, source in enumerate(node.input):
                if source not in frontier:
                    continue
                if node.op in _FUNCTION_ATTRIBUTES:
                    called = node.attr[_FUNCTION_ATTRIBUTES[node.op]].func.name
                    types |= _argument_uses(functions, called, position)
                elif node.op == 'Identity':
                    following.add(f'{node.name}:output:0')
                else:
                    types.add(node.op)
        frontier = following
    return types

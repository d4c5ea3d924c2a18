"""Which TensorFlow ops a SavedModel's graph may hold: an allow list, never a deny list.

A Keras SavedModel carries traced functions, and ``tf_keras`` calls them for any layer it
cannot rebuild from its config. Ops act on the machine through attributes and inputs a crafted
graph sets freely: ``PrintV2`` appends to any ``file://`` path, ``DebugIdentity`` sends to
``debug_urls``, ``ReadFile`` / ``ImmutableConst`` / ``TextLineDataset`` /
``InitializeTableFromTextFileV2`` / ``MatchingFiles`` read local files into tensors, dataset
``cache`` and summary writers write them. Rather than chase each, :func:`check_graph_ops`
accepts only the ops listed here: what the package's models (every rule and preset, both
tasks, the zoo's SVGP, DS-DGP and DSPP), Keras' standard layers, losses, metrics and
optimizers, GPflow and GPflux trace, with the pure maths and control flow beside them. None of
them names a file, a device or a URL.

The checkpoint ops (:data:`CHECKPOINT_OPS`: ``SaveV2``, ``RestoreV2``, ...) are accepted only
in the functions that ``model.save`` traces to write and read the weights, and only if no
other function can call them.
"""

from __future__ import annotations

from typing import Iterable

from .errors import UnsafeModelError

__all__ = ["ALLOWED_OPS", "CHECKPOINT_OPS", "check_graph_ops"]

_MATHS = """
Abs Acos Acosh Add AddN AddV2 All Any ApproximateEqual ArgMax ArgMin Asin Asinh Atan Atan2
Atanh BatchMatMul BatchMatMulV2 BatchMatMulV3 BesselI0e BesselI1e Betainc BiasAdd Bitcast
BitwiseAnd BitwiseOr BitwiseXor Bucketize Cast Ceil Cholesky ClipByValue Complex ComplexAbs
Conj Cos Cosh Cross Cumprod Cumsum CumulativeLogsumexp Digamma Div DivNoNan Einsum Elu Equal
Erf Erfc Erfinv EuclideanNorm Exp Expm1 Floor FloorDiv FloorMod Greater GreaterEqual Igamma
Igammac Imag Inv Invert IsFinite IsInf IsNan L2Loss LeakyRelu LeftShift Less LessEqual
Lgamma LinSpace Log Log1p LogMatrixDeterminant LogSoftmax LogicalAnd LogicalNot LogicalOr
MatMul MatrixBandPart MatrixDeterminant MatrixDiag MatrixDiagPart MatrixDiagPartV2
MatrixDiagPartV3 MatrixDiagV2 MatrixDiagV3 MatrixInverse MatrixSetDiag MatrixSetDiagV2
MatrixSetDiagV3 MatrixSolve MatrixTriangularSolve Max Maximum Mean Min Minimum Mod Mul
MulNoNan Ndtri Neg NextAfter NotEqual OneHot Polygamma Pow Prod Qr Real RealDiv Reciprocal
Relu Relu6 RightShift Rint Round Rsqrt Select SelectV2 SelfAdjointEigV2 Selu Sigmoid Sign Sin
Sinh Softmax SoftmaxCrossEntropyWithLogits Softplus Softsign
SparseSoftmaxCrossEntropyWithLogits Sqrt Square SquaredDifference Sub Sum Svd Tan Tanh TopKV2
TruncateDiv TruncateMod Xdivy Xlog1py Xlogy Zeta
"""
_NETWORKS = """
AvgPool AvgPool3D BiasAddV1 Conv Conv2D Conv2DBackpropFilter Conv2DBackpropInput Conv3D
Conv3DBackpropFilterV2 Conv3DBackpropInputV2 CudnnRNN CudnnRNNBackprop CudnnRNNBackpropV2
CudnnRNNBackpropV3 CudnnRNNParamsSize CudnnRNNV2 CudnnRNNV3 DepthToSpace DepthwiseConv2dNative
DepthwiseConv2dNativeBackpropFilter DepthwiseConv2dNativeBackpropInput Dilation2D
FusedBatchNorm FusedBatchNormV2 FusedBatchNormV3 LRN MaxPool MaxPool3D MaxPoolV2
MaxPoolWithArgmax ResizeArea ResizeBicubic ResizeBilinear ResizeNearestNeighbor SpaceToDepth
"""
_SHAPES = """
BatchToSpaceND BroadcastArgs BroadcastGradientArgs BroadcastTo ConcatOffset ConcatV2
EnsureShape ExpandDims Fill Gather GatherNd GatherV2 InvertPermutation MirrorPad OnesLike
Pack Pad PadV2 Range Rank Reshape Reverse ReverseSequence ReverseV2 ScatterNd Shape ShapeN
Size Slice SpaceToBatchND Split SplitV Squeeze StridedSlice TensorScatterAdd
TensorScatterUpdate Tile Transpose Unique Unpack Where ZerosLike
"""
_RANDOM = """
Multinomial RandomGamma RandomShuffle RandomStandardNormal RandomUniform RandomUniformInt
RngReadAndSkip StatelessMultinomial StatelessRandomGetAlg StatelessRandomGetKeyCounter
StatelessRandomGetKeyCounterAlg StatelessRandomNormal StatelessRandomNormalV2
StatelessRandomUniform StatelessRandomUniformFullInt StatelessRandomUniformFullIntV2
StatelessRandomUniformInt StatelessRandomUniformIntV2 StatelessRandomUniformV2
StatelessTruncatedNormal StatelessTruncatedNormalV2 TruncatedNormal
"""
_STATE_AND_FLOW = """
Assert AssignAddVariableOp AssignSubVariableOp AssignVariableOp CheckNumerics CheckNumericsV2
Const DestroyResourceOp DisableCopyOnRead EmptyTensorList Identity IdentityN If NoOp
PartitionedCall Placeholder PlaceholderWithDefault PreventGradient ReadVariableOp
ResourceGather ResourceGatherNd ResourceScatterAdd ResourceScatterUpdate Snapshot
StatefulPartitionedCall StatelessCase StatelessIf StatelessWhile StaticRegexFullMatch
StopGradient StringJoin TensorListConcatV2 TensorListElementShape TensorListFromTensor
TensorListGather TensorListGetItem TensorListLength TensorListPopBack TensorListPushBack
TensorListReserve TensorListScatterIntoExistingList TensorListSetItem TensorListSplit
TensorListStack VarHandleOp VarIsInitializedOp While Case
"""

#: Ops accepted anywhere in a SavedModel graph: maths, network layers, shapes, random draws,
#: variables and control flow, none with a file, device or URL among its inputs or attributes.
ALLOWED_OPS = frozenset(" ".join((_MATHS, _NETWORKS, _SHAPES, _RANDOM, _STATE_AND_FLOW)).split())
#: Ops that read or write the checkpoint: accepted only in the saver's own functions.
CHECKPOINT_OPS = frozenset({"SaveV2", "RestoreV2", "MergeV2Checkpoints", "ShardedFilename"})


def _called_functions(nodes: Iterable) -> set[str]:
    """Names of the functions that graph nodes call (``f``, branches, loop bodies)."""
    names = set()
    for node in nodes:
        for value in node.attr.values():
            if value.HasField("func"):
                names.add(value.func.name)
            names.update(function.name for function in value.list.func)
    return names


def _closure(roots: set[str], library: dict) -> set[str]:
    reached, pending = set(), list(roots)
    while pending:
        name = pending.pop()
        if name in reached or name not in library:
            continue
        reached.add(name)
        pending.extend(_called_functions(library[name].node_def))
    return reached


def check_graph_ops(path: str, meta_graph) -> None:
    """Refuse ``meta_graph`` (a ``MetaGraphDef``) if any node's op is outside
    :data:`ALLOWED_OPS`, or a checkpoint op is outside the saver's own functions.

    :param path: the SavedModel folder, for the message.
    :raises UnsafeModelError: one line naming the op, its node and where it is.
    """
    library = {
        function.signature.name: function for function in meta_graph.graph_def.library.function
    }
    saver_def = meta_graph.saver_def
    saver_nodes = {saver_def.save_tensor_name.split(":")[0], saver_def.restore_op_name}
    main_nodes = list(meta_graph.graph_def.node)
    saver = _closure(_called_functions(n for n in main_nodes if n.name in saver_nodes), library)
    roots = _called_functions(n for n in main_nodes if n.name not in saver_nodes)
    objects = meta_graph.object_graph_def
    roots.update(objects.concrete_functions.keys())
    for node in objects.nodes:
        kind = node.WhichOneof("kind")
        if kind == "function":
            roots.update(node.function.concrete_functions)
        elif kind == "bare_concrete_function":
            roots.add(node.bare_concrete_function.concrete_function_name)
    callable_elsewhere = _closure(roots, library)
    places = [("the main graph", main_nodes, False)] + [
        (f"function {name}", function.node_def, name in saver and name not in callable_elsewhere)
        for name, function in library.items()
    ]
    for where, nodes, checkpoints in places:
        for node in nodes:
            if node.op in ALLOWED_OPS or (checkpoints and node.op in CHECKPOINT_OPS):
                continue
            raise UnsafeModelError(
                f"{path}: refused: {where} holds a {node.op} op ({node.name}), which is not "
                "on the allow list of pure maths, variable and control-flow ops"
            )

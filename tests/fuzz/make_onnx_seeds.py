#!/usr/bin/env python3
"""Small ONNX models for the onnx_import fuzz corpus: one per importer path (folding, fusion,
convolutions, attention-style reshapes, external-data references), each a few hundred bytes."""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]


def save(name, nodes, inputs, outputs, inits=(), opset=13):
    graph = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, f"{out}/{name}.onnx")


def vi(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def init(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


save("relu_chain", [helper.make_node("Relu", [f"x{i}"], [f"x{i + 1}"]) for i in range(4)],
     [vi("x0", ["N", 4])], [vi("x4", ["N", 4])])
save("gemm", [helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)], [vi("x", ["N", 3])], [vi("y", ["N", 2])],
     [init("w", np.ones((2, 3), np.float32)), init("b", np.zeros(2, np.float32))])
save("conv_bn", [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                 helper.make_node("BatchNormalization", ["c", "s", "o", "m", "v"], ["y"])],
     [vi("x", ["N", 1, 4, 4])], [vi("y", ["N", 2, 4, 4])],
     [init("w", np.ones((2, 1, 3, 3), np.float32)), init("s", np.ones(2, np.float32)),
      init("o", np.zeros(2, np.float32)), init("m", np.zeros(2, np.float32)), init("v", np.ones(2, np.float32))])
save("reshape_transpose", [
    helper.make_node("Shape", ["x"], ["s"]),
    helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
    helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
    helper.make_node("Concat", ["n1", "rest"], ["shape"], axis=0),
    helper.make_node("Reshape", ["x", "shape"], ["r"]),
    helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1]),
    helper.make_node("Softmax", ["t"], ["y"], axis=-1)],
    [vi("x", ["N", 8])], [vi("y", ["N", 4, 2])],
    [init("zero", np.array(0, np.int64)), init("axes", np.array([0], np.int64)),
     init("rest", np.array([2, 4], np.int64))])
save("layernorm_gelu", [
    helper.make_node("ReduceMean", ["x"], ["mu"], axes=[-1]),
    helper.make_node("Sub", ["x", "mu"], ["d"]),
    helper.make_node("Mul", ["d", "d"], ["d2"]),
    helper.make_node("ReduceMean", ["d2"], ["var"], axes=[-1]),
    helper.make_node("Add", ["var", "eps"], ["ve"]),
    helper.make_node("Sqrt", ["ve"], ["sd"]),
    helper.make_node("Div", ["d", "sd"], ["n"]),
    helper.make_node("Div", ["n", "sqrt2"], ["q"]),
    helper.make_node("Erf", ["q"], ["e"]),
    helper.make_node("Add", ["e", "one"], ["e1"]),
    helper.make_node("Mul", ["n", "e1"], ["h"]),
    helper.make_node("Mul", ["h", "half"], ["y"])],
    [vi("x", ["N", 6])], [vi("y", ["N", 6])],
    [init("eps", np.float32(1e-5)), init("sqrt2", np.float32(1.4142135)), init("one", np.float32(1)),
     init("half", np.float32(0.5))])
save("constant_of_shape_range", [
    helper.make_node("ConstantOfShape", ["shape"], ["z"], value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0])),
    helper.make_node("Range", ["a", "b", "c"], ["r"]),
    helper.make_node("Cast", ["r"], ["rf"], to=TensorProto.FLOAT),
    helper.make_node("Add", ["x", "rf"], ["t"]),
    helper.make_node("Mul", ["t", "z"], ["y"])],
    [vi("x", ["N", 4])], [vi("y", ["N", 4])],
    [init("shape", np.array([4], np.int64)), init("a", np.array(0, np.int64)), init("b", np.array(4, np.int64)),
     init("c", np.array(1, np.int64))])
save("pool_flatten", [helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
                      helper.make_node("GlobalAveragePool", ["p"], ["g"]),
                      helper.make_node("Flatten", ["g"], ["y"])],
     [vi("x", ["N", 2, 4, 4])], [vi("y", ["N", 2])])
# An initializer whose data lives in an external file: read from bytes it must be refused cleanly.
w = init("w", np.ones((2, 2), np.float32))
w.ClearField("raw_data")
w.data_location = TensorProto.EXTERNAL
for k, v in (("location", "w.bin"), ("offset", "0"), ("length", "16")):
    e = w.external_data.add()
    e.key, e.value = k, v
save("external_data", [helper.make_node("MatMul", ["x", "w"], ["y"])], [vi("x", ["N", 2])], [vi("y", ["N", 2])], [w])

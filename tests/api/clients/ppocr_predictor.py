"""A PaddleOCR-style client: `create_predictor(args, mode, logger)` makes the paddle.inference calls of
PaddleOCR's tools/infer/utility.py, then det/cls/rec run as predict_det/cls/rec.py do
(copy_from_cpu, run, copy_to_cpu over the output handles)."""
import argparse
import logging
import os
import sys

import numpy as np

from pdlite import inference  # PaddleOCR: from paddle import inference


def str2bool(v):
    return v.lower() in ("true", "yes", "t", "y", "1")


def init_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--use_gpu", type=str2bool, default=False)
    parser.add_argument("--use_xpu", type=str2bool, default=False)
    parser.add_argument("--use_npu", type=str2bool, default=False)
    parser.add_argument("--ir_optim", type=str2bool, default=True)
    parser.add_argument("--use_tensorrt", type=str2bool, default=False)
    parser.add_argument("--min_subgraph_size", type=int, default=15)
    parser.add_argument("--precision", type=str, default="fp32")
    parser.add_argument("--gpu_mem", type=int, default=500)
    parser.add_argument("--gpu_id", type=int, default=0)
    parser.add_argument("--det_model_dir", type=str)
    parser.add_argument("--cls_model_dir", type=str)
    parser.add_argument("--rec_model_dir", type=str)
    parser.add_argument("--rec_algorithm", type=str, default="SVTR_LCNet")
    parser.add_argument("--enable_mkldnn", type=str2bool, default=None)
    parser.add_argument("--cpu_threads", type=int, default=10)
    parser.add_argument("--max_batch_size", type=int, default=10)
    # test hooks
    parser.add_argument("--mode", type=str, default="det")
    parser.add_argument("--input_npz", type=str, default="")
    parser.add_argument("--save_output", type=str, default="")
    return parser


def create_predictor(args, mode, logger):
    if mode == "det":
        model_dir = args.det_model_dir
    elif mode == "cls":
        model_dir = args.cls_model_dir
    else:
        model_dir = args.rec_model_dir
    if model_dir is None:
        logger.info("not find {} model file path {}".format(mode, model_dir))
        sys.exit(0)

    file_names = ["model", "inference"]
    for file_name in file_names:
        params_file_path = f"{model_dir}/{file_name}.pdiparams"
        if os.path.exists(params_file_path):
            break
    if not os.path.exists(params_file_path):
        raise ValueError(f"not find {file_name}.pdiparams in {model_dir}")
    if not (os.path.exists(f"{model_dir}/{file_name}.pdmodel") or os.path.exists(f"{model_dir}/{file_name}.json")):
        raise ValueError(f"neither {file_name}.json nor {file_name}.pdmodel was found in {model_dir}.")
    if os.path.exists(f"{model_dir}/{file_name}.json"):
        model_file_path = f"{model_dir}/{file_name}.json"
    else:
        model_file_path = f"{model_dir}/{file_name}.pdmodel"

    config = inference.Config(model_file_path, params_file_path)

    if hasattr(args, "precision"):
        if args.precision == "fp16" and args.use_tensorrt:
            precision = inference.PrecisionType.Half
        elif args.precision == "int8":
            precision = inference.PrecisionType.Int8
        else:
            precision = inference.PrecisionType.Float32
    else:
        precision = inference.PrecisionType.Float32

    if args.use_gpu:
        config.enable_use_gpu(args.gpu_mem, args.gpu_id)
        if args.use_tensorrt:
            config.enable_tensorrt_engine(workspace_size=1 << 30, precision_mode=precision,
                                          max_batch_size=args.max_batch_size,
                                          min_subgraph_size=args.min_subgraph_size, use_calib_mode=False)
    elif args.use_npu:
        config.enable_custom_device("npu")
    elif args.use_xpu:
        config.enable_xpu(10 * 1024 * 1024)
    else:
        config.disable_gpu()
        if args.enable_mkldnn is not None:
            if args.enable_mkldnn:
                # cache 10 different shapes for mkldnn to avoid memory leak
                config.set_mkldnn_cache_capacity(10)
                config.enable_mkldnn()
                if args.precision == "fp16":
                    config.enable_mkldnn_bfloat16()
            else:
                if hasattr(config, "disable_mkldnn"):
                    config.disable_mkldnn()
        if hasattr(args, "cpu_threads"):
            config.set_cpu_math_library_num_threads(args.cpu_threads)
        else:
            config.set_cpu_math_library_num_threads(10)
        if hasattr(config, "enable_new_ir"):
            config.enable_new_ir()
        if hasattr(config, "enable_new_executor"):
            config.enable_new_executor()

    # enable memory optim
    config.enable_memory_optim()
    config.disable_glog_info()
    config.delete_pass("conv_transpose_eltwiseadd_bn_fuse_pass")
    config.delete_pass("matmul_transpose_reshape_fuse_pass")
    if mode == "rec" and args.rec_algorithm == "SRN":
        config.delete_pass("gpu_cpu_map_matmul_v2_to_matmul_pass")
    config.switch_use_feed_fetch_ops(False)
    config.switch_ir_optim(True)

    # create predictor
    predictor = inference.create_predictor(config)
    input_names = predictor.get_input_names()
    for name in input_names:
        input_tensor = predictor.get_input_handle(name)
    output_tensors = get_output_tensors(args, mode, predictor)
    return predictor, input_tensor, output_tensors, config


def get_output_tensors(args, mode, predictor):
    output_names = predictor.get_output_names()
    output_tensors = []
    if mode == "rec" and args.rec_algorithm in ["CRNN", "SVTR_LCNet"]:
        output_name = "softmax_0.tmp_0"
        if output_name in output_names:
            return [predictor.get_output_handle(output_name)]
    for output_name in output_names:
        output_tensors.append(predictor.get_output_handle(output_name))
    return output_tensors


def predict(predictor, input_tensor, output_tensors, img):
    """As predict_det/cls/rec.py: copy in, run, copy every output out."""
    input_tensor.copy_from_cpu(img)
    predictor.run()
    outputs = []
    for output_tensor in output_tensors:
        outputs.append(output_tensor.copy_to_cpu())
    return outputs


if __name__ == "__main__":
    args = init_args().parse_args()
    predictor, input_tensor, output_tensors, config = create_predictor(args, args.mode, logging.getLogger("ppocr"))
    z = np.load(args.input_npz)
    img = z[[k for k in z.files if k.startswith("in:")][0]]
    outs = predict(predictor, input_tensor, output_tensors, img)
    print(config.summary())
    if args.save_output:
        np.save(args.save_output, outs[0])

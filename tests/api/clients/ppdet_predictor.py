"""A PaddleDetection-style client: `load_predictor` as deploy/python/infer.py makes it (Config(model_dir, prefix)
on Paddle 3), then the detector's run: copy_from_cpu per input name, run, copy_to_cpu per output name."""
import argparse
import os

import numpy as np

from pdlite.inference import Config, create_predictor  # PaddleDetection: from paddle.inference import ...


def load_predictor(model_dir, run_mode="paddle", batch_size=1, device="CPU", min_subgraph_size=3,
                   cpu_threads=1, enable_mkldnn=False, enable_mkldnn_bfloat16=False, delete_shuffle_pass=False):
    if device != "GPU" and run_mode != "paddle":
        raise ValueError("Predict by TensorRT mode: {}, expect device=='GPU', but device == {}".format(
            run_mode, device))
    model_prefix = "model"
    if not os.path.exists(os.path.join(model_dir, "model.pdiparams")):
        model_prefix = "inference"
        if not (os.path.exists(os.path.join(model_dir, "inference.json"))
                or os.path.exists(os.path.join(model_dir, "inference.pdmodel"))):
            raise ValueError("Cannot find any inference model in dir: {}.".format(model_dir))
    config = Config(model_dir, model_prefix)

    if device == "GPU":
        config.enable_use_gpu(200, 0)
        config.switch_ir_optim(True)
    elif device == "XPU":
        if config.lite_engine_enabled():
            config.enable_lite_engine()
        config.enable_xpu(10 * 1024 * 1024)
    elif device == "NPU":
        config.enable_custom_device("npu")
    else:
        config.disable_gpu()
        config.set_cpu_math_library_num_threads(cpu_threads)
        if enable_mkldnn:
            try:
                config.set_mkldnn_cache_capacity(10)
                config.enable_mkldnn()
                if enable_mkldnn_bfloat16:
                    config.enable_mkldnn_bfloat16()
            except Exception:
                print("The current environment does not support `mkldnn`, so disable mkldnn.")

    precision_map = {"trt_int8": Config.Precision.Int8, "trt_fp32": Config.Precision.Float32,
                     "trt_fp16": Config.Precision.Half}
    if run_mode in precision_map.keys():
        config.enable_tensorrt_engine(workspace_size=(1 << 25) * batch_size, max_batch_size=batch_size,
                                      min_subgraph_size=min_subgraph_size, precision_mode=precision_map[run_mode],
                                      use_static=False, use_calib_mode=False)
    # disable print log when predict
    config.disable_glog_info()
    # enable shared memory
    config.enable_memory_optim()
    # disable feed, fetch OP, needed by zero_copy_run
    config.switch_use_feed_fetch_ops(False)
    if delete_shuffle_pass:
        config.delete_pass("shuffle_channel_detect_pass")
    predictor = create_predictor(config)
    return predictor, config


def predict(predictor, inputs):
    input_names = predictor.get_input_names()
    for name in input_names:
        predictor.get_input_handle(name).copy_from_cpu(inputs[name])
    predictor.run()
    return [predictor.get_output_handle(n).copy_to_cpu() for n in predictor.get_output_names()]


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--model_dir", required=True)
    p.add_argument("--enable_mkldnn", action="store_true")
    p.add_argument("--cpu_threads", type=int, default=1)
    p.add_argument("--input_npz", required=True)
    p.add_argument("--save_output", default="")
    a = p.parse_args()
    predictor, config = load_predictor(a.model_dir, cpu_threads=a.cpu_threads, enable_mkldnn=a.enable_mkldnn)
    z = np.load(a.input_npz)
    outs = predict(predictor, {k[3:]: z[k] for k in z.files if k.startswith("in:")})
    if a.save_output:
        np.save(a.save_output, outs[0])

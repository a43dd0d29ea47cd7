"""A paddlelite full-API client: configure a CxxConfig for a backend, optimize, run, print statistics."""
import argparse
import platform

import numpy as np

from pdlite.lite import *  # paddlelite: from paddlelite.lite import *

parser = argparse.ArgumentParser()
parser.add_argument("--model_dir", default="", type=str)
parser.add_argument("--model_file", default="", type=str)
parser.add_argument("--param_file", default="", type=str)
parser.add_argument("--input_shape", default=[1, 3, 224, 224], nargs="+", type=int)
parser.add_argument("--backend", default="", type=str, help="arm|opencl|x86|x86_opencl|metal|nnadapter|xpu")
parser.add_argument("--nnadapter_device_names", default="", type=str)
parser.add_argument("--nnadapter_context_properties", default="", type=str)
parser.add_argument("--nnadapter_model_cache_dir", default="", type=str)
parser.add_argument("--nnadapter_subgraph_partition_config_path", default="", type=str)
parser.add_argument("--nnadapter_mixed_precision_quantization_config_path", default="", type=str)
parser.add_argument("--input_npz", default="", type=str, help="(test hook) feed the 'in:' array of this file")
parser.add_argument("--save_output", default="", type=str, help="(test hook) save output 0 here (.npy)")


def run_model(args):
    config = CxxConfig()
    if args.model_file and args.param_file:
        config.set_model_file(args.model_file)
        config.set_param_file(args.param_file)
    else:
        config.set_model_dir(args.model_dir)

    cpu = TargetType.X86 if platform.machine() in ("x86_64", "AMD64", "x64") else TargetType.ARM
    backend = args.backend.upper()
    if backend == "X86":
        places = [Place(TargetType.X86, PrecisionType.FP32)]
    elif backend == "ARM":
        places = [Place(TargetType.ARM, PrecisionType.FP32)]
    elif backend in ("OPENCL", "X86_OPENCL"):
        places = [Place(TargetType.OpenCL, PrecisionType.FP16, DataLayoutType.ImageDefault),
                  Place(cpu, PrecisionType.FP32), Place(TargetType.Host, PrecisionType.FP32)]
        config.set_opencl_binary_path_name("./", "lite_opencl_kernel.bin")
        config.set_opencl_tune(CLTuneMode.CL_TUNE_NORMAL, "./", "lite_opencl_tuned.bin", 4)
        config.set_opencl_precision(CLPrecisionType.CL_PRECISION_AUTO)
    elif backend == "METAL":
        config.set_metal_lib_path("lite.metallib")
        config.set_metal_use_mps(True)
        places = [Place(TargetType.Metal, PrecisionType.FP32, DataLayoutType.MetalTexture2DArray)]
    elif backend == "NNADAPTER":
        if not args.nnadapter_device_names:
            print("Please set nnadapter_device_names when backend = nnadapter!")
            return 2
        places = [Place(TargetType.NNAdapter, PrecisionType.FP32), Place(cpu, PrecisionType.FP32),
                  Place(TargetType.Host, PrecisionType.FP32)]
        config.set_nnadapter_device_names(args.nnadapter_device_names.split(","))
        config.set_nnadapter_context_properties(args.nnadapter_context_properties)
        config.set_nnadapter_model_cache_dir(args.nnadapter_model_cache_dir)
        config.set_nnadapter_subgraph_partition_config_path(args.nnadapter_subgraph_partition_config_path)
        config.set_nnadapter_mixed_precision_quantization_config_path(
            args.nnadapter_mixed_precision_quantization_config_path)
    elif backend == "XPU":
        places = [Place(TargetType.XPU, PrecisionType.FP32)]
    else:
        raise ValueError("Unsupported backend: %s." % args.backend)
    config.set_valid_places(places)

    predictor = create_paddle_predictor(config)
    predictor.save_optimized_model("opt_" + args.backend)

    input_tensor = predictor.get_input(0)
    if args.input_npz:
        z = np.load(args.input_npz)
        input_tensor.from_numpy(z[[k for k in z.files if k.startswith("in:")][0]])
    else:
        c, h, w = args.input_shape[1:4]
        input_tensor.from_numpy(np.ones((1, c, h, w)).astype("float32"))
    predictor.run()
    out = predictor.get_output(0).numpy()
    print("mean:{:.6e}, std:{:.6e}, min:{:.6e}, max:{:.6e}".format(np.mean(out), np.std(out), np.min(out),
                                                                    np.max(out)))
    if args.save_output:
        np.save(args.save_output, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(run_model(parser.parse_args()))

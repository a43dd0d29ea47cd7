"""A paddlelite light-API client: load an optimized .nb with MobileConfig, run, print statistics."""
import argparse

import numpy as np

from pdlite.lite import *  # paddlelite: from paddlelite.lite import *

parser = argparse.ArgumentParser()
parser.add_argument("--model_dir", default="", type=str, help="the optimized .nb file")
parser.add_argument("--input_shape", default=[1, 3, 224, 224], nargs="+", type=int)
parser.add_argument("--backend", default="", type=str)
parser.add_argument("--input_npz", default="", type=str, help="(test hook) feed the 'in:' array of this file")
parser.add_argument("--save_output", default="", type=str, help="(test hook) save output 0 here (.npy)")


def run_model(args):
    config = MobileConfig()
    config.set_model_from_file(args.model_dir)
    if args.backend.upper() in ("OPENCL", "X86_OPENCL"):
        config.set_opencl_binary_path_name("./", "lite_opencl_kernel.bin")
        config.set_opencl_tune(CLTuneMode.CL_TUNE_NORMAL, "./", "lite_opencl_tuned.bin", 4)
        config.set_opencl_precision(CLPrecisionType.CL_PRECISION_AUTO)
    elif args.backend.upper() == "METAL":
        config.set_metal_lib_path("lite.metallib")
        config.set_metal_use_mps(True)

    predictor = create_paddle_predictor(config)
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

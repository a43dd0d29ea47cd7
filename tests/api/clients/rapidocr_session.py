"""A RapidOCR-style client: its paddle engine's session (Config from the two files, the CPU device setup with
hasattr guards, init_predictor's calls), then __call__: copy_from_cpu, run, copy_to_cpu, try_shrink_memory."""
import argparse
import os
from pathlib import Path

import numpy as np

from pdlite import inference  # RapidOCR: from paddle import inference


class PaddleInferSession:
    def __init__(self, model_dir: str, threads: int = -1, new_ir: bool = True, mode: str = "det"):
        model_dir = Path(model_dir)
        pdmodel = model_dir / "inference.json"
        if not pdmodel.exists():
            pdmodel = model_dir / "inference.pdmodel"
        infer_opts = inference.Config(str(pdmodel), str(model_dir / "inference.pdiparams"))
        infer_opts.disable_gpu()
        if hasattr(infer_opts, "disable_mkldnn"):
            infer_opts.disable_mkldnn()
        if threads != -1 and 1 <= threads <= os.cpu_count():
            infer_opts.set_cpu_math_library_num_threads(threads)
        if new_ir:
            if hasattr(infer_opts, "enable_new_ir"):
                infer_opts.enable_new_ir(True)
            if hasattr(infer_opts, "enable_new_executor"):
                infer_opts.enable_new_executor()
            if hasattr(infer_opts, "set_optimization_level"):
                infer_opts.set_optimization_level(3)
        self.mode = mode
        infer_opts.enable_memory_optim()
        infer_opts.disable_glog_info()
        infer_opts.delete_pass("conv_transpose_eltwiseadd_bn_fuse_pass")
        infer_opts.delete_pass("matmul_transpose_reshape_fuse_pass")
        infer_opts.switch_use_feed_fetch_ops(False)
        infer_opts.switch_ir_optim(True)
        self.predictor = inference.create_predictor(infer_opts)

    def __call__(self, img: np.ndarray):
        input_tensor = self.get_input_tensors()
        output_tensors = self.get_output_tensors()
        input_tensor.copy_from_cpu(img)
        self.predictor.run()
        outputs = [t.copy_to_cpu() for t in output_tensors]
        self.predictor.try_shrink_memory()
        return outputs[0]

    def get_input_tensors(self):
        for name in self.predictor.get_input_names():
            input_tensor = self.predictor.get_input_handle(name)
        return input_tensor

    def get_output_tensors(self):
        output_names = self.predictor.get_output_names()
        if self.mode == "rec" and "softmax_0.tmp_0" in output_names:
            return [self.predictor.get_output_handle("softmax_0.tmp_0")]
        return [self.predictor.get_output_handle(n) for n in output_names]


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--model_dir", required=True)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--input_npz", required=True)
    p.add_argument("--save_output", default="")
    a = p.parse_args()
    session = PaddleInferSession(a.model_dir, a.threads)
    z = np.load(a.input_npz)
    out = session(z[[k for k in z.files if k.startswith("in:")][0]])
    if a.save_output:
        np.save(a.save_output, out)

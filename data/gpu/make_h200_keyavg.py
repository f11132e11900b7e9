"""Profile the two examples on CUDA; write the Kineto traces and torch's key_averages() numbers (oracle for tests).

Run on a CUDA machine from the repo root with OUT set: OUT=data/gpu python data/gpu/make_h200_keyavg.py, then
gzip the *.key_averages.json files.
"""
import gzip, json, os, sys, time
sys.path.insert(0, "examples")
import torch
from torch.profiler import ProfilerActivity, profile, schedule
out = os.environ["OUT"]
print(torch.__version__, torch.cuda.get_device_name(0), flush=True)

def rows(avgs, shapes):
    r = []
    for e in avgs:
        r.append({"name": e.key, "device_type": str(e.device_type), "shapes": json.dumps(e.input_shapes) if shapes else "",
                  "count": e.count, "self_cpu_us": e.self_cpu_time_total, "cpu_us": e.cpu_time_total,
                  "self_device_us": e.self_device_time_total, "device_us": e.device_time_total,
                  "cpu_mem": e.cpu_memory_usage, "self_cpu_mem": e.self_cpu_memory_usage,
                  "device_mem": e.device_memory_usage, "self_device_mem": e.self_device_memory_usage})
    return r

for tag, mod in (("cnn", "train_cnn"), ("lm", "train_transformer")):
    m = __import__(mod)
    kw = dict(device="cuda")
    m.train(3, **kw)  # warm up cuDNN/cuBLAS outside the profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True, profile_memory=True,
                 schedule=schedule(wait=1, warmup=1, active=3, repeat=1)) as prof:
        m.train(5, profiler=prof, **kw)
    path = os.path.join(out, f"{tag}_h200.pt.trace.json")
    prof.export_chrome_trace(path)
    with open(path, "rb") as f, gzip.open(path + ".gz", "wb", compresslevel=9) as g:
        g.write(f.read())
    os.remove(path)
    t = time.perf_counter()
    ka = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0),
          "name": rows(prof.key_averages(), False), "shapes": rows(prof.key_averages(group_by_input_shape=True), True)}
    print(tag, "key_averages", time.perf_counter() - t, len(ka["name"]), os.path.getsize(path + ".gz"), flush=True)
    with open(os.path.join(out, f"{tag}_h200.key_averages.json"), "w") as f:
        json.dump(ka, f)
print(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=12))

"""CPU profile of the CNN example with stacks (verbose config), shapes, memory; plus torch's key_averages().

Made with torch 2.11.0 (the H200 machine's torch): OUT=data/cpu python data/cpu/make_cnn_stack_torch211.py,
then the diag.* outputs renamed to cnn_stack_torch211.* (key_averages rows re-keyed as in the JSON file).
"""
import gzip, json, os, sys
sys.path.insert(0, "examples")
import torch
from torch.profiler import ProfilerActivity, profile, schedule
from train_cnn import train
torch.set_num_threads(1)
out = os.environ["OUT"]
with profile(activities=[ProfilerActivity.CPU], record_shapes=True, profile_memory=True, with_stack=True,
             experimental_config=torch._C._profiler._ExperimentalConfig(verbose=True),
             schedule=schedule(wait=1, warmup=1, active=5, repeat=1)) as prof:
    train(7, profiler=prof)
p = os.path.join(out, "diag.pt.trace.json")
prof.export_chrome_trace(p)
with open(p, "rb") as f, gzip.open(p + ".gz", "wb") as g:
    g.write(f.read())
os.remove(p)
ka = [(e.key, e.count, e.cpu_time_total, e.self_cpu_time_total, e.cpu_memory_usage, e.self_cpu_memory_usage) for e in prof.key_averages()]
steps = []
for e in prof.events():
    if e.name.startswith("ProfilerStep"):
        steps.append({"name": e.name, "start": e.time_range.start, "end": e.time_range.end, "self": e.self_cpu_time_total,
                      "children": [(c.name, c.time_range.start, c.time_range.end) for c in e.cpu_children],
                      "parent": e.cpu_parent.name if e.cpu_parent else None})
json.dump({"ka": ka, "steps": steps}, open(os.path.join(out, "diag.json"), "w"))
print("diag done", len(ka))

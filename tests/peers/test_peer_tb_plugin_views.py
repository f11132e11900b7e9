# ruff: noqa: E501  (the peer's inline events, one per line)
"""torch-tb-profiler's other ``TestProfiler`` cases, ``TestMemoryCurve`` and ``TestModuleView`` as nbprof tests.

Peer: pytorch/kineto ``tb_plugin/test/test_profiler.py`` at 041e7ce99f15 (the last commit with
``tb_plugin/``; line numbers are that file's), the cases ``tests/peers/test_peer_tb_plugin.py`` does not
carry. Each case's ``json_content`` is carried verbatim in ``CASES``; every value the peer asserts on a
concept nbprof computes is asserted here on nbprof's public API with the peer's number:
:func:`~nbprof.analysis.steps.step_breakdown` (Overview step costs),
:func:`~nbprof.analysis.operators.operator_summary` (operator view),
:func:`~nbprof.analysis.operators.operator_memory` (memory view),
:func:`~nbprof.analysis.kernels.kernel_summary` / ``kernel_table`` / ``kernel_operators`` / ``gpu_metrics`` (GPU Kernel view, utilisation, est. SM efficiency, occupancy, Tensor
Cores), :func:`~nbprof.analysis.memory.memory_curve` (memory curve) and
:func:`~nbprof.analysis.modules.module_tree` (module view).

``COUNTS`` gives per case (equal, asserted, of views nbprof does not have). Deliberately different:

- the operator lists' length (no_profilerstep, multiple_profilersteps_no_overlap: 2 each; tensor_core: 1):
  nbprof lists every host row torch's ``key_averages`` has (runtime calls, ``ProfilerStep*``), as in
  ``test_peer_tb_plugin.py``.

Conventions, not differences: est. achieved occupancy is a ratio in nbprof (``..._ratio``, 0..1), the
plugin keeps the trace's percent (its 0.55 is nbprof's 0.0055); a kernel field the trace does not record
is ``None`` in the plugin, ``''`` (grid, block) or -1 (registers, shared memory) in nbprof; the Kernel + Op
rows are compared by key (nbprof sorts them by total time, the plugin keeps insertion order); the memory
curve's step-plot points (``patch_for_step_plot=True``) are the corners Bokeh's ``step(mode="after")``
draws from nbprof's curve (``nbprof/viz/memory.py``), so they are asserted from the curve.

Not computed by nbprof (counted apart, not asserted): two internal counters of the plugin
(``blocks_per_sm_count``, ``occupancy_count``).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import nbprof
from nbprof.analysis import kernels as K
from nbprof.analysis import memory as M
from nbprof.analysis import modules as MD
from nbprof.analysis import operators as O
from nbprof.analysis import steps as S
from nbprof.analysis import utilization as u
from nbprof.trace import predicates as pred

CASES = {  # test name -> its json_content, verbatim (test_profiler.py lines in the tests below)
    'top_level_runtime': [  # lines 347-367
        {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 13721, "tid": "123", "ts": 100, "dur": 100, "args": {"Input Dims": [], "External id": 2}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 130, "dur": 20, "args": {"correlation": 335, "external id": 335}},
        {"ph": "X", "cat": "Kernel", "name": "void gemmSN_TN_kernel_64addr", "pid": 0, "tid": "stream 7", "ts": 220, "dur": 8, "args": {"correlation": 335, "external id": 335, "device": 0}},
    ],
    'runtime_launch_multipe_kernels': [  # lines 416-444
        {"ph": "X", "cat": "Operator", "name": "Broadcast", "pid": 13721, "tid": "456", "ts": 100, "dur": 300, "args": {"Input Dims": [], "External id": 2}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchCooperativeKernelMultiDevice", "pid": 13721, "tid": "456", "ts": 130, "dur": 20, "args": {"correlation": 335, "external id": 2}},
        {"ph": "X", "cat": "Kernel", "name": "ncclBroadcastRingLLKernel_copy_i8(ncclColl)", "pid": 0, "tid": "stream 13", "ts": 160, "dur": 120318, "args": {"device": 0, "context": 1, "stream": 13, "correlation": 335, "external id": 2}},
        {"ph": "X", "cat": "Kernel", "name": "ncclBroadcastRingLLKernel_copy_i8(ncclColl)", "pid": 0, "tid": "stream 22", "ts": 170, "dur": 132800, "args": {"device": 0, "context": 2, "stream": 22, "correlation": 335, "external id": 2}},
    ],
    'no_profilerstep': [  # lines 454-480
        {"ph": "X", "cat": "Operator", "name": "aten::to", "pid": 13721, "tid": "123", "ts": 100, "dur": 60, "args": {"Input Dims": [[2, 8, 5], [], [], [], [], [], [], []], "External id": 3}},
        {"ph": "X", "cat": "Operator", "name": "aten::nll_loss_backward", "pid": 13721, "tid": "456", "ts": 300, "dur": 70, "args": {"Input Dims": [[], [32, 1000], [32], [], [], [], []], "External id": 4}},
        {"ph": "X", "cat": "Kernel", "name": "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", "pid": 0, "tid": "stream 7", "ts": 320, "dur": 100, "args": {"correlation": 40348, "external id": 4, "device": 0}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 310, "dur": 20, "args": {"correlation": 40348, "external id": 4}},
    ],
    'multiple_profilersteps_no_overlap': [  # lines 549-598
        {"ph": "X", "cat": "Operator", "name": "ProfilerStep#1", "pid": 13721, "tid": "123", "ts": 100, "dur": 200, "args": {"Input Dims": [], "External id": 1}},
        {"ph": "X", "cat": "Operator", "name": "aten::to", "pid": 13721, "tid": "123", "ts": 200, "dur": 60, "args": {"Input Dims": [[2, 8, 5], [], [], [], [], [], [], []], "External id": 2}},
        {"ph": "X", "cat": "Operator", "name": "ProfilerStep#2", "pid": 13721, "tid": "123", "ts": 350, "dur": 150, "args": {"Input Dims": [], "External id": 3}},
        {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 13721, "tid": "123", "ts": 360, "dur": 50, "args": {"Input Dims": [], "External id": 4}},
        {"ph": "X", "cat": "Memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": "stream 7", "ts": 280, "dur": 40, "args": {"stream": 7, "correlation": 334, "external id": 2}},
        {"ph": "X", "cat": "Runtime", "name": "cudaMemcpyAsync", "pid": 13721, "tid": "123", "ts": 250, "dur": 5, "args": {"correlation": 334, "external id": 2}},
        {"ph": "X", "cat": "Kernel", "name": "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", "pid": 0, "tid": "stream 7", "ts": 410, "dur": 200, "args": {"correlation": 40348, "external id": 4, "device": 0}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "123", "ts": 400, "dur": 5, "args": {"correlation": 40348, "external id": 4}},
    ],
    'self_time': [  # lines 678-715
        {"ph": "X", "cat": "Operator", "name": "aten::mat_mul", "pid": 13721, "tid": "456", "ts": 100, "dur": 100, "args": {"Input Dims": [], "External id": 2}},
        {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 13721, "tid": "456", "ts": 120, "dur": 40, "args": {"Input Dims": [], "External id": 4}},
        {"ph": "X", "cat": "Kernel", "name": "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", "pid": 0, "tid": "stream 7", "ts": 155, "dur": 20, "args": {"correlation": 334, "external id": 4, "device": 0}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 150, "dur": 10, "args": {"correlation": 334, "external id": 4}},
        {"ph": "X", "cat": "Kernel", "name": "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", "pid": 0, "tid": "stream 7", "ts": 210, "dur": 16, "args": {"correlation": 335, "external id": 2, "device": 0}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 170, "dur": 25, "args": {"correlation": 335, "external id": 2}},
    ],
    'multiple_profilersteps_with_overlap': [  # lines 742-797
        {"ph": "X", "cat": "Operator", "name": "ProfilerStep#1", "pid": 13721, "tid": "123", "ts": 100, "dur": 200, "args": {"Input Dims": [], "External id": 1}},
        {"ph": "X", "cat": "Operator", "name": "aten::to", "pid": 13721, "tid": "123", "ts": 200, "dur": 60, "args": {"Input Dims": [[2, 8, 5], [], [], [], [], [], [], []], "External id": 2}},
        {"ph": "X", "cat": "Operator", "name": "ProfilerStep#2", "pid": 13721, "tid": "123", "ts": 350, "dur": 150, "args": {"Input Dims": [], "External id": 3}},
        {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 13721, "tid": "123", "ts": 360, "dur": 50, "args": {"Input Dims": [], "External id": 4}},
        {"ph": "X", "cat": "Kernel", "name": "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", "pid": 0, "tid": "stream 7", "ts": 150, "dur": 90, "args": {"correlation": 123, "external id": 123, "device": 0}},
        {"ph": "X", "cat": "Memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": "stream 7", "ts": 280, "dur": 100, "args": {"stream": 7, "correlation": 334, "external id": 2}},
        {"ph": "X", "cat": "Runtime", "name": "cudaMemcpyAsync", "pid": 13721, "tid": "123", "ts": 250, "dur": 5, "args": {"correlation": 334, "external id": 2}},
        {"ph": "X", "cat": "Kernel", "name": "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", "pid": 0, "tid": "stream 7", "ts": 410, "dur": 200, "args": {"correlation": 40348, "external id": 4, "device": 0}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "123", "ts": 400, "dur": 5, "args": {"correlation": 40348, "external id": 4}},
    ],
    'last_steps_no_kernel': [  # lines 831-874
        {"ph": "X", "cat": "Operator", "name": "ProfilerStep#1", "pid": 13721, "tid": "123", "ts": 100, "dur": 200, "args": {"Input Dims": [], "External id": 1}},
        {"ph": "X", "cat": "Operator", "name": "aten::to", "pid": 13721, "tid": "123", "ts": 120, "dur": 10, "args": {"Input Dims": [[2, 8, 5], [], [], [], [], [], [], []], "External id": 2}},
        {"ph": "X", "cat": "Operator", "name": "ProfilerStep#2", "pid": 13721, "tid": "123", "ts": 300, "dur": 100, "args": {"Input Dims": [], "External id": 3}},
        {"ph": "X", "cat": "Operator", "name": "ProfilerStep#3", "pid": 13721, "tid": "123", "ts": 400, "dur": 50, "args": {"Input Dims": [], "External id": 4}},
        {"ph": "X", "cat": "Kernel", "name": "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", "pid": 0, "tid": "stream 7", "ts": 90, "dur": 20, "args": {"correlation": 123, "external id": 123, "device": 0}},
        {"ph": "X", "cat": "Runtime", "name": "cudaMemcpyAsync", "pid": 13721, "tid": "123", "ts": 125, "dur": 5, "args": {"correlation": 334, "external id": 2}},
        {"ph": "X", "cat": "Kernel", "name": "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", "pid": 0, "tid": "stream 7", "ts": 150, "dur": 180, "args": {"correlation": 334, "external id": 2, "device": 0}},
    ],
    'pure_cpu': [  # lines 885-910
        {"ph": "X", "cat": "Operator", "name": "ProfilerStep#1", "pid": 13721, "tid": "123", "ts": 100, "dur": 200, "args": {"Input Dims": [], "External id": 1}},
        {"ph": "X", "cat": "Operator", "name": "aten::to", "pid": 13721, "tid": "123", "ts": 120, "dur": 10, "args": {"Input Dims": [[2, 8, 5], [], [], [], [], [], [], []], "External id": 2}},
        {"ph": "X", "cat": "Operator", "name": "ProfilerStep#2", "pid": 13721, "tid": "123", "ts": 300, "dur": 100, "args": {"Input Dims": [], "External id": 3}},
        {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 13721, "tid": "123", "ts": 350, "dur": 40, "args": {"Input Dims": [], "External id": 4}},
    ],
    'gpu_utilization': [  # lines 936-1008
        {"ph": "X", "cat": "Operator", "name": "aten::mat_mul", "pid": 13721, "tid": "456", "ts": 100, "dur": 100, "args": {"Input Dims": [], "External id": 2}},
        {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 13721, "tid": "456", "ts": 120, "dur": 70, "args": {"Input Dims": [], "External id": 4}},
        {"ph": "X", "cat": "Kernel", "name": "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", "pid": 1, "tid": "stream 7", "ts": 130, "dur": 10, "args": {"correlation": 334, "external id": 4, "device": 1, "blocks per SM": 0.5, "est. achieved occupancy %": 0.6}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 120, "dur": 0, "args": {"correlation": 334, "external id": 4}},
        {"ph": "X", "cat": "Kernel", "name": "void gemmSN_TN_kernel_64addr", "pid": 1, "tid": "stream 8", "ts": 135, "dur": 15, "args": {"correlation": 335, "external id": 2, "device": 1, "blocks per SM": 0.6, "est. achieved occupancy %": 0.1}},
        {"ph": "X", "cat": "Kernel", "name": "void gemmSN_TN_kernel_64addr", "pid": 1, "tid": "stream 8", "ts": 150, "dur": 0, "args": {"correlation": 335, "external id": 2, "device": 1, "blocks per SM": 0.3, "est. achieved occupancy %": 0.2}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 120, "dur": 0, "args": {"correlation": 335, "external id": 2}},
        {"ph": "X", "cat": "Kernel", "name": "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", "pid": 1, "tid": "stream 7", "ts": 145, "dur": 25, "args": {"correlation": 336, "external id": 4, "device": 1, "blocks per SM": 0.3, "est. achieved occupancy %": 1.0}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 125, "dur": 3, "args": {"correlation": 336, "external id": 4}},
        {"ph": "X", "cat": "Kernel", "name": "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", "pid": 1, "tid": "stream 7", "ts": 200, "dur": 20, "args": {"correlation": 337, "external id": 2, "device": 1, "blocks per SM": 10.5, "est. achieved occupancy %": 0.3}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 195, "dur": 1, "args": {"correlation": 337, "external id": 2}},
    ],
    'gpu_utilization_kernel_out_of_step': [  # lines 1090-1141
        {"ph": "X", "cat": "Operator", "name": "aten::mat_mul", "pid": 13721, "tid": "456", "ts": 10, "dur": 10, "args": {"Input Dims": [], "External id": 1}},
        {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 13721, "tid": "456", "ts": 120, "dur": 70, "args": {"Input Dims": [], "External id": 3}},
        {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 13721, "tid": "456", "ts": 220, "dur": 20, "args": {"Input Dims": [], "External id": 4}},
        {"ph": "X", "cat": "Operator", "name": "ProfilerStep#2", "pid": 13721, "tid": "456", "ts": 100, "dur": 100, "args": {"Input Dims": [], "External id": 2}},
        {"ph": "X", "cat": "Kernel", "name": "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", "pid": 1, "tid": "stream 7", "ts": 60, "dur": 20, "args": {"correlation": 334, "external id": 1, "device": 1, "blocks per SM": 0.5, "est. achieved occupancy %": 0.6}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 15, "dur": 5, "args": {"correlation": 334, "external id": 1}},
        {"ph": "X", "cat": "Kernel", "name": "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", "pid": 1, "tid": "stream 7", "ts": 240, "dur": 25, "args": {"correlation": 337, "external id": 4, "device": 1, "blocks per SM": 10.5, "est. achieved occupancy %": 0.3}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 230, "dur": 10, "args": {"correlation": 337, "external id": 4}},
    ],
    'group_by_kernel_columns': [  # lines 1643-1709
        {"ph": "X", "cat": "Operator", "name": "op1", "pid": 13721, "tid": "123", "ts": 200, "dur": 60, "args": {"Input Dims": [[2, 8, 5], [], [], [], [], [], [], []], "External id": 3}},
        {"ph": "X", "cat": "Operator", "name": "op2", "pid": 13721, "tid": "456", "ts": 340, "dur": 70, "args": {"Input Dims": [[], [32, 1000], [32], [], [], [], []], "External id": 4}},
        {"ph": "X", "cat": "Kernel", "name": "kernel1", "pid": 0, "tid": "stream 7", "ts": 230, "dur": 15, "args": {"correlation": 1000, "external id": 3, "device": 0, "grid": [16, 1, 1], "block": [16, 16, 16], "registers per thread": 18, "shared memory": 0}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 210, "dur": 5, "args": {"correlation": 1000, "external id": 3}},
        {"ph": "X", "cat": "Kernel", "name": "kernel1", "pid": 0, "tid": "stream 7", "ts": 250, "dur": 10, "args": {"correlation": 1001, "external id": 3, "device": 0, "grid": [16, 1, 1], "block": [16, 16, 16], "registers per thread": 18, "shared memory": 0}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 215, "dur": 5, "args": {"correlation": 1001, "external id": 3}},
        {"ph": "X", "cat": "Kernel", "name": "kernel1", "pid": 0, "tid": "stream 7", "ts": 250, "dur": 13, "args": {"correlation": 1002, "external id": 3, "device": 0, "grid": [16, 1, 1], "block": [16, 16, 64], "registers per thread": 18, "shared memory": 0}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 220, "dur": 5, "args": {"correlation": 1002, "external id": 3}},
        {"ph": "X", "cat": "Kernel", "name": "kernel1", "pid": 0, "tid": "stream 7", "ts": 250, "dur": 17, "args": {"correlation": 1003, "external id": 4, "device": 0, "grid": [16, 1, 1], "block": [16, 16, 64], "registers per thread": 18, "shared memory": 0}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 350, "dur": 5, "args": {"correlation": 1003, "external id": 4}},
    ],
    'group_by_kernel_columns_invalid_input': [  # lines 1772-1844
        {"ph": "X", "cat": "Operator", "name": "op1", "pid": 13721, "tid": "123", "ts": 200, "dur": 60, "args": {"Input Dims": [[2, 8, 5], [], [], [], [], [], [], []], "External id": 3}},
        {"ph": "X", "cat": "Kernel", "name": "kernel1", "pid": 0, "tid": "stream 7", "ts": 220, "dur": 1, "args": {"correlation": 1000, "external id": 3, "device": 0, "block": [16, 16, 16], "registers per thread": 18, "shared memory": 0}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 210, "dur": 5, "args": {"correlation": 1000, "external id": 3}},
        {"ph": "X", "cat": "Kernel", "name": "kernel1", "pid": 0, "tid": "stream 7", "ts": 230, "dur": 2, "args": {"correlation": 1001, "external id": 3, "device": 0, "grid": [16, 1, 1], "registers per thread": 18, "shared memory": 0}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 220, "dur": 5, "args": {"correlation": 1001, "external id": 3}},
        {"ph": "X", "cat": "Kernel", "name": "kernel1", "pid": 0, "tid": "stream 7", "ts": 240, "dur": 3, "args": {"correlation": 1002, "external id": 3, "device": 0, "grid": [16, 1, 1], "block": [16, 16, 16], "shared memory": 0}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 230, "dur": 5, "args": {"correlation": 1002, "external id": 3}},
        {"ph": "X", "cat": "Kernel", "name": "kernel1", "pid": 0, "tid": "stream 7", "ts": 250, "dur": 4, "args": {"correlation": 1003, "external id": 3, "device": 0, "grid": [16, 1, 1], "block": [16, 16, 16], "registers per thread": 18}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 240, "dur": 5, "args": {"correlation": 1003, "external id": 3}},
        {"ph": "X", "cat": "Kernel", "name": "kernel1", "pid": 0, "tid": "stream 7", "ts": 260, "dur": 5, "args": {"correlation": 1004, "external id": 3, "device": 0}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 250, "dur": 5, "args": {"correlation": 1004, "external id": 3}},
    ],
    'tensor_core': [  # lines 1934-1979
        {"ph": "X", "cat": "Operator", "name": "aten::conv2d", "pid": 13721, "tid": "123", "ts": 200, "dur": 100, "args": {"Input Dims": [[]], "External id": 3}},
        {"ph": "X", "cat": "Operator", "name": "op_no_tc", "pid": 13721, "tid": "123", "ts": 205, "dur": 10, "args": {"Input Dims": [[]], "External id": 4}},
        {"ph": "X", "cat": "Operator", "name": "aten::cudnn_convolution", "pid": 13721, "tid": "123", "ts": 215, "dur": 10, "args": {"Input Dims": [[]], "External id": 5}},
        {"ph": "X", "cat": "Kernel", "name": "kernel_no_tc", "pid": 0, "tid": "stream 7", "ts": 210, "dur": 10, "args": {"correlation": 1000, "external id": 4, "device": 0}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "123", "ts": 205, "dur": 5, "args": {"correlation": 1000, "external id": 4}},
        {"ph": "X", "cat": "Kernel", "name": "volta_fp16_s884cudnn_fp16_128x128_ldg8_splitK_relu_f2f_exp_small_nhwc_tn_v1", "pid": 0, "tid": "stream 7", "ts": 220, "dur": 15, "args": {"correlation": 1001, "external id": 5, "device": 0}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "123", "ts": 215, "dur": 5, "args": {"correlation": 1001, "external id": 5}},
    ],
    'memory_view': [  # lines 1239-1598
        {"ph": "X", "cat": "Operator", "name": "aten::to", "pid": 13721, "tid": "123", "ts": 10, "dur": 10, "args": {"Input Dims": [], "External id": 2}},
        {"ph": "X", "cat": "Operator", "name": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "pid": 13721, "tid": "123", "ts": 100, "dur": 180, "args": {"Input Dims": [], "External id": 2}},
        {"ph": "X", "cat": "Operator", "name": "aten::to", "pid": 13721, "tid": "123", "ts": 200, "dur": 60, "args": {"Input Dims": [[2, 8, 5], [], [], [], [], [], [], []], "External id": 3}},
        {"ph": "X", "cat": "Operator", "name": "aten::nll_loss_backward", "pid": 13721, "tid": "123", "ts": 340, "dur": 70, "args": {"Input Dims": [[], [32, 1000], [32], [], [], [], []], "External id": 4}},
        {"ph": "X", "cat": "Operator", "name": "ProfilerStep#1", "pid": 13721, "tid": "123", "ts": 50, "dur": 400, "args": {"Input Dims": [], "External id": 1}},
        {"ph": "X", "cat": "Operator", "name": "ProfilerStep#2", "pid": 13721, "tid": "123", "ts": 500, "dur": 500, "args": {"Input Dims": [], "External id": 1}},
        {"ph": "X", "cat": "Operator", "name": "aten::to", "pid": 13721, "tid": "123", "ts": 510, "dur": 150, "args": {"Input Dims": [[2, 8, 5], [], [], [], [], [], [], []], "External id": 3}},
        {"ph": "X", "cat": "Operator", "name": "aten::copy_", "pid": 13721, "tid": "123", "ts": 520, "dur": 100, "args": {"Input Dims": [[2, 8, 5], [], [], [], [], [], [], []], "External id": 3}},
        {"ph": "X", "cat": "Operator", "name": "aten::liner", "pid": 13721, "tid": "123", "ts": 700, "dur": 100, "args": {"Input Dims": [[2, 8, 5], [], [], [], [], [], [], []], "External id": 3}},
        {"ph": "X", "cat": "Operator", "name": "aten::t", "pid": 13721, "tid": "123", "ts": 705, "dur": 40, "args": {"Input Dims": [[2, 8, 5], [], [], [], [], [], [], []], "External id": 3}},
        {"ph": "X", "cat": "Operator", "name": "aten::transpose", "pid": 13721, "tid": "123", "ts": 710, "dur": 30, "args": {"Input Dims": [[2, 8, 5], [], [], [], [], [], [], []], "External id": 3}},
        {"ph": "X", "cat": "Operator", "name": "aten::tranas_stride", "pid": 13721, "tid": "123", "ts": 720, "dur": 10, "args": {"Input Dims": [[2, 8, 5], [], [], [], [], [], [], []], "External id": 3}},
        {"ph": "X", "cat": "Operator", "name": "aten::addmm", "pid": 13721, "tid": "123", "ts": 750, "dur": 40, "args": {"Input Dims": [[2, 8, 5], [], [], [], [], [], [], []], "External id": 3}},
        {"ph": "X", "cat": "Operator", "name": "aten::to", "pid": 13721, "tid": "123", "ts": 900, "dur": 100, "args": {"Input Dims": [[2, 8, 5], [], [], [], [], [], [], []], "External id": 3}},
        {"ph": "X", "cat": "Memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": "stream 7", "ts": 405, "dur": 10, "args": {"stream": 7, "correlation": 334, "external id": 4}},
        {"ph": "X", "cat": "Runtime", "name": "cudaMemcpyAsync", "pid": 13721, "tid": "456", "ts": 360, "dur": 20, "args": {"correlation": 334, "external id": 4}},
        {"ph": "X", "cat": "Memset", "name": "Memset (Device)", "pid": 0, "tid": "stream 7", "ts": 420, "dur": 5, "args": {"stream": 7, "correlation": 40344, "external id": 4}},
        {"ph": "X", "cat": "Runtime", "name": "cudaMemsetAsync", "pid": 13721, "tid": "456", "ts": 390, "dur": 10, "args": {"correlation": 40344, "external id": 4}},
        {"ph": "X", "cat": "Kernel", "name": "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", "pid": 0, "tid": "stream 7", "ts": 430, "dur": 15, "args": {"correlation": 40348, "external id": 4, "device": 0}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 405, "dur": 5, "args": {"correlation": 40348, "external id": 4}},
        {"ph": "i", "s": "t", "name": "[memory]", "pid": 13721, "tid": 123, "ts": 90, "args": {"Device Type": 0, "Device Id": -1, "Addr": 90, "Bytes": 4}},
        {"ph": "i", "s": "t", "name": "[memory]", "pid": 13721, "tid": 123, "ts": 150, "args": {"Device Type": 0, "Device Id": -1, "Addr": 150, "Bytes": 4}},
        {"ph": "i", "s": "t", "name": "[memory]", "pid": 13721, "tid": 123, "ts": 200, "args": {"Device Type": 0, "Device Id": -1, "Addr": 200, "Bytes": 4}},
        {"ph": "i", "s": "t", "name": "[memory]", "pid": 13721, "tid": 123, "ts": 210, "args": {"Device Type": 1, "Device Id": 0, "Addr": 210, "Bytes": 4}},
        {"ph": "i", "s": "t", "name": "[memory]", "pid": 13721, "tid": 123, "ts": 265, "args": {"Device Type": 1, "Device Id": 0, "Addr": 265, "Bytes": 4}},
        {"ph": "i", "s": "t", "name": "[memory]", "pid": 13721, "tid": 123, "ts": 300, "args": {"Device Type": 1, "Device Id": 0, "Addr": 300, "Bytes": 4}},
        {"ph": "i", "s": "t", "name": "[memory]", "pid": 13721, "tid": 123, "ts": 350, "args": {"Device Type": 1, "Device Id": 0, "Addr": 350, "Bytes": 10}},
        {"ph": "i", "s": "t", "name": "[memory]", "pid": 13721, "tid": 123, "ts": 360, "args": {"Device Type": 1, "Device Id": 0, "Addr": 350, "Bytes": -10}},
        {"ph": "i", "s": "t", "name": "[memory]", "pid": 13721, "tid": 123, "ts": 450, "args": {"Device Type": 0, "Device Id": -1, "Addr": 450, "Bytes": 1000000}},
        {"ph": "i", "s": "t", "name": "[memory]", "pid": 13721, "tid": 123, "ts": 515, "args": {"Device Type": 1, "Device Id": 0, "Addr": 515, "Bytes": 100}},
        {"ph": "i", "s": "t", "name": "[memory]", "pid": 13721, "tid": 123, "ts": 520, "args": {"Device Type": 1, "Device Id": 0, "Addr": 520, "Bytes": 100}},
        {"ph": "i", "s": "t", "name": "[memory]", "pid": 13721, "tid": 123, "ts": 600, "args": {"Device Type": 1, "Device Id": 0, "Addr": 520, "Bytes": -100}},
        {"ph": "i", "s": "t", "name": "[memory]", "pid": 13721, "tid": 123, "ts": 690, "args": {"Device Type": 1, "Device Id": 0, "Addr": 690, "Bytes": 100}},
        {"ph": "i", "s": "t", "name": "[memory]", "pid": 13721, "tid": 123, "ts": 701, "args": {"Device Type": 1, "Device Id": 0, "Addr": 701, "Bytes": 100}},
        {"ph": "i", "s": "t", "name": "[memory]", "pid": 13721, "tid": 123, "ts": 796, "args": {"Device Type": 1, "Device Id": 0, "Addr": 515, "Bytes": -100}},
        {"ph": "i", "s": "t", "name": "[memory]", "pid": 13721, "tid": 123, "ts": 708, "args": {"Device Type": 1, "Device Id": 0, "Addr": 708, "Bytes": 100}},
        {"ph": "i", "s": "t", "name": "[memory]", "pid": 13721, "tid": 123, "ts": 742, "args": {"Device Type": 1, "Device Id": 0, "Addr": 708, "Bytes": -100}},
        {"ph": "i", "s": "t", "name": "[memory]", "pid": 13721, "tid": 123, "ts": 715, "args": {"Device Type": 1, "Device Id": 0, "Addr": 715, "Bytes": 50}},
        {"ph": "i", "s": "t", "name": "[memory]", "pid": 13721, "tid": 123, "ts": 735, "args": {"Device Type": 1, "Device Id": 0, "Addr": 715, "Bytes": -50}},
        {"ph": "i", "s": "t", "name": "[memory]", "pid": 13721, "tid": 123, "ts": 725, "args": {"Device Type": 1, "Device Id": 0, "Addr": 725, "Bytes": 50}},
        {"ph": "i", "s": "t", "name": "[memory]", "pid": 13721, "tid": 123, "ts": 728, "args": {"Device Type": 1, "Device Id": 0, "Addr": 725, "Bytes": -50}},
        {"ph": "i", "s": "t", "name": "[memory]", "pid": 13721, "tid": 123, "ts": 729, "args": {"Device Type": 0, "Device Id": -1, "Addr": 729, "Bytes": 50}},
        {"ph": "i", "s": "t", "name": "[memory]", "pid": 13721, "tid": 123, "ts": 746, "args": {"Device Type": 0, "Device Id": -1, "Addr": 746, "Bytes": 100}},
        {"ph": "i", "s": "t", "name": "[memory]", "pid": 13721, "tid": 123, "ts": 747, "args": {"Device Type": 1, "Device Id": 0, "Addr": 747, "Bytes": 20}},
        {"ph": "i", "s": "t", "name": "[memory]", "pid": 13721, "tid": 123, "ts": 749, "args": {"Device Type": 0, "Device Id": -1, "Addr": 690, "Bytes": -100}},
        {"ph": "i", "s": "t", "name": "[memory]", "pid": 13721, "tid": 123, "ts": 760, "args": {"Device Type": 1, "Device Id": 0, "Addr": 760, "Bytes": 30}},
        {"ph": "i", "s": "t", "name": "[memory]", "pid": 13721, "tid": 123, "ts": 780, "args": {"Device Type": 1, "Device Id": 0, "Addr": 760, "Bytes": -30}},
        {"ph": "i", "s": "t", "name": "[memory]", "pid": 13721, "tid": 123, "ts": 795, "args": {"Device Type": 1, "Device Id": 0, "Addr": 795, "Bytes": 10}},
        {"ph": "i", "s": "t", "name": "[memory]", "pid": 13721, "tid": 123, "ts": 799, "args": {"Device Type": 1, "Device Id": 0, "Addr": 795, "Bytes": -10}},
    ],
    'build_module_hierarchy': [  # lines 2514-2675
        {"ph": "X", "cat": "python_function", "name": "test_root", "pid": 1908, "tid": 1908, "ts": 1, "dur": 19367, "args": {"Python id": 1, "Python thread": 0}},
        {"ph": "X", "cat": "python_function", "name": "nn.Module: MyModule", "pid": 1908, "tid": 1908, "ts": 2, "dur": 211, "args": {"Python id": 2, "Python parent id": 1, "Python module id": 0}},
        {"ph": "X", "cat": "python_function", "name": "nn.Module: Linear", "pid": 1908, "tid": 1908, "ts": 5, "dur": 62, "args": {"Python id": 3, "Python parent id": 2, "Python thread": 0, "Python module id": 1}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1908, "tid": 1908, "ts": 10, "dur": 31, "args": {"External id": 12182, "Fwd thread id": 0, "Sequence number": 4006, "python_caller_id": 3}},
        {"ph": "X", "cat": "python_function", "name": "nn.Module: MyModule", "pid": 1908, "tid": 1908, "ts": 1000, "dur": 211, "args": {"Python id": 4, "Python parent id": 1, "Python module id": 0}},
        {"ph": "X", "cat": "python_function", "name": "nn.Module: Linear", "pid": 1908, "tid": 1908, "ts": 1001, "dur": 62, "args": {"Python id": 5, "Python parent id": 4, "Python thread": 0, "Python module id": 1}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1908, "tid": 1908, "ts": 1002, "dur": 32, "args": {"External id": 12182, "Fwd thread id": 0, "Sequence number": 4006, "python_caller_id": 5}},
        {"ph": "X", "cat": "python_function", "name": "nn.Module: MyModule", "pid": 1908, "tid": 1908, "ts": 2000, "dur": 211, "args": {"Python id": 6, "Python parent id": 1, "Python module id": 0}},
        {"ph": "X", "cat": "python_function", "name": "nn.Module: Linear", "pid": 1908, "tid": 1908, "ts": 2001, "dur": 62, "args": {"Python id": 7, "Python parent id": 6, "Python thread": 0, "Python module id": 1}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1908, "tid": 1908, "ts": 2002, "dur": 33, "args": {"External id": 12182, "Fwd thread id": 0, "Sequence number": 4006, "python_caller_id": 7}},
        {"ph": "X", "cat": "python_function", "name": "nn.Module: Conv2", "pid": 1908, "tid": 1908, "ts": 3000, "dur": 211, "args": {"Python id": 8, "Python parent id": 1, "Python module id": 100}},
    ],
}

#: case -> (values equal, values asserted, values of views nbprof does not have)
COUNTS = {
    "top_level_runtime": (3, 3, 0), "runtime_launch_multipe_kernels": (3, 3, 0), "no_profilerstep": (51, 53, 0),
    "multiple_profilersteps_no_overlap": (60, 62, 0), "self_time": (9, 9, 0),
    "multiple_profilersteps_with_overlap": (20, 20, 0), "last_steps_no_kernel": (2, 2, 0), "pure_cpu": (17, 17, 0),
    "gpu_utilization": (72, 72, 0), "gpu_utilization_kernel_out_of_step": (12, 12, 2),
    "group_by_kernel_columns": (34, 34, 0), "group_by_kernel_columns_invalid_input": (56, 56, 0),
    "tensor_core": (18, 19, 0), "memory_view": (93, 93, 0), "build_module_hierarchy": (12, 12, 0),
    "memory_curve_no_step_plot": (71, 71, 0), "memory_curve_step_plot": (104, 104, 0),
}
KNAME = "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>"
COSTS = ("kernel_ns", "memcpy_ns", "memset_ns", "runtime_ns", "dataloader_ns", "cpu_exec_ns", "other_ns", "step_ns")


def _load(tmp_path, events, name="worker0"):
    p = tmp_path / f"{name}.pt.trace.json"
    p.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return nbprof.load(p)


def _us(ns):
    return int(ns) // 1000


def _costs(t):
    return [[_us(r[c]) for c in COSTS] for _, r in S.step_breakdown(t).iterrows()]


def _has(t):
    ev = t.events
    return (bool(pred.is_runtime(ev).any()), bool(pred.is_kernel(ev).any()),
            bool(ev["cat"].astype(str).isin(["gpu_memcpy", "gpu_memset"]).any()))


def _op(ops, name, shapes=False):
    r = ops.loc[name]
    vals = (int(r["count"]), _us(r["total_host_ns"]), _us(r["total_device_ns"]), _us(r["self_host_ns"]),
            _us(r["self_device_ns"]))
    return (r["input_dims"], *vals) if shapes else vals


def _kernel_rows(t):
    ks = K.kernel_summary(t).set_index("name")
    kt = K.kernel_table(t, by="kernel_operator")
    return ks, kt


def test_top_level_runtime(tmp_path):
    """Lines 345-373: a runtime call on another thread than the op gives the op no device time (2 values)
    and the kernel is counted (1)."""
    t = _load(tmp_path, CASES["top_level_runtime"])
    ops = O.operator_summary(t).set_index("name")
    assert (_us(ops.loc["aten::mm", "total_device_ns"]), _us(ops.loc["aten::mm", "self_device_ns"])) == (0, 0)
    assert int(K.kernel_summary(t)["instances"].iloc[0]) == 1


def test_runtime_launch_multiple_kernels(tmp_path):
    """Lines 415-451: one ``cudaLaunchCooperativeKernelMultiDevice`` launching two kernels: the op's device
    time is both (120,318 + 132,800 µs), 2 kernel calls, one Kernel + Op row."""
    t = _load(tmp_path, CASES["runtime_launch_multipe_kernels"])
    ops = O.operator_summary(t).set_index("name")
    assert _us(ops.loc["Broadcast", "total_device_ns"]) == 120318 + 132800
    assert int(K.kernel_summary(t)["instances"].iloc[0]) == 2
    assert len(K.kernel_table(t, by="kernel_operator")) == 1


def _op_lists(t, exp):
    """The plugin's ``test_op_list`` on both groupings: per op (input shape, calls, host, device, self host,
    self device) and the count of ops found."""
    n = 0
    for shapes in (False, True):
        ops = O.operator_summary(t, group_by="shapes" if shapes else "name").set_index("name")
        for name, vals in exp.items():
            assert _op(ops, name, shapes=shapes) == (vals if shapes else vals[1:])
            n += 1
    return n


def _kernel_by_op(t, name, op, total):
    kt = K.kernel_table(t, by="kernel_operator")
    r = kt[(kt["name"] == name) & (kt["operator"] == op)].iloc[0]
    assert (int(r["calls"]), _us(r["total_ns"]), _us(r["min_ns"]), _us(r["max_ns"])) == (1, total, total, total)
    ks = K.kernel_summary(t).iloc[0]
    assert (int(ks["instances"]), _us(ks["total_ns"]), ks["avg_ns"] / 1e3, _us(ks["min_ns"]), _us(ks["max_ns"])) == (
        1, total, total, total, total)


def test_no_profilerstep(tmp_path):
    """Lines 453-546: without ``ProfilerStep`` the whole trace is one step: Kernel 100, Memcpy 0, Memset 0,
    Runtime 10, DataLoader 0, CpuOp 70, Other 140, Total 320 µs; the op rows of ``aten::to`` and
    ``aten::nll_loss_backward`` by name and by shape; the kernel rows. 51 of 53 equal; the two op-list
    lengths (2; nbprof 3 with ``cudaLaunchKernel``) deliberately differ."""
    t = _load(tmp_path, CASES["no_profilerstep"])
    assert _has(t) == (True, True, False)
    assert _costs(t) == [[100, 0, 0, 10, 0, 60 + 10, 300 - 160, 320]]
    assert len(O.operator_summary(t)) == len(O.operator_summary(t, group_by="shapes")) == 3  # tb-plugin: 2
    assert _op_lists(t, {"aten::to": ("[[2, 8, 5], [], [], [], [], [], [], []]", 1, 60, 0, 60, 0),
                         "aten::nll_loss_backward": ("[[], [32, 1000], [32], [], [], [], []]", 1, 70, 100, 50, 100)}) == 4
    assert len(K.kernel_table(t, by="kernel_operator")) == 1
    assert K.kernel_operators(t)["operator"].tolist() == ["aten::nll_loss_backward"]
    _kernel_by_op(t, KNAME, "aten::nll_loss_backward", 100)


def test_multiple_profilersteps_no_overlap(tmp_path):
    """Lines 548-675: two steps, the first extended to its memcpy's end (Total 220 = 320 - 100 µs), the
    second to its kernel's (260); average 240; op rows and kernel rows. 60 of 62 equal; the op-list lengths
    (2; nbprof 5) deliberately differ."""
    t = _load(tmp_path, CASES["multiple_profilersteps_no_overlap"])
    assert _has(t) == (True, True, True)
    assert _costs(t) == [[0, 40, 0, 5, 0, 55, 120, 220], [200, 0, 0, 5, 0, 45, 10, 260]]
    assert _us(S.breakdown_average(S.step_breakdown(t))["step_ns"]) == ((320 - 100) + (610 - 350)) // 2
    assert len(O.operator_summary(t)) == 5  # tb-plugin: 2
    assert _op_lists(t, {"aten::to": ("[[2, 8, 5], [], [], [], [], [], [], []]", 1, 60, 40, 55, 40),
                         "aten::mm": ("[]", 1, 50, 200, 45, 200)}) == 4
    assert len(K.kernel_table(t, by="kernel_operator")) == len(K.kernel_summary(t)) == 1
    _kernel_by_op(t, KNAME, "aten::mm", 200)


def test_self_time(tmp_path):
    """Lines 677-733: nested op self/total host and device times (9 values, all equal)."""
    t = _load(tmp_path, CASES["self_time"])
    ops = O.operator_summary(t).set_index("name")
    assert _op(ops, "aten::mat_mul") == (1, 100, 20 + 16, 100 - 40 - 25, 16)
    assert _op(ops, "aten::mm") == (1, 40, 20, 30, 20)


def test_multiple_profilersteps_with_overlap(tmp_path):
    """Lines 735-828: device work of the previous step starts a step; a memcpy crossing into the next step
    starts that one (20 values, all equal)."""
    t = _load(tmp_path, CASES["multiple_profilersteps_with_overlap"])
    assert _has(t) == (True, True, True)
    assert _costs(t) == [[0, 100, 0, 5, 0, (200 + 60) - (150 + 90) - 5, 280 - (200 + 60), (280 + 100) - (150 + 90)],
                         [200, 0, 0, 5, 0, (280 + 100) - 360 + (410 - 405), 0, 610 - (280 + 100)]]


def test_last_steps_no_kernel(tmp_path):
    """Lines 830-882: trailing steps without kernels are dropped; the one step lasts (150 + 180) - (90 + 20)."""
    t = _load(tmp_path, CASES["last_steps_no_kernel"])
    assert [c[-1] for c in _costs(t)] == [(150 + 180) - (90 + 20)]


def test_pure_cpu(tmp_path):
    """Lines 884-933: two CPU-only steps (17 values, all equal)."""
    t = _load(tmp_path, CASES["pure_cpu"])
    assert _costs(t) == [[0, 0, 0, 0, 0, 10, 190, 200], [0, 0, 0, 0, 0, 40, 60, 100]]


def _kernel_op_means(t):
    kt = K.kernel_table(t, by="kernel_operator")
    return {(r["name"], r["operator"]): (r["mean_blocks_per_sm"], 100 * r["mean_est_achieved_occupancy_ratio"])
            for _, r in kt.iterrows()}


def _kernel_means(t):
    kt = K.kernel_table(t, by="kernel").set_index("name")
    return {n: (kt.loc[n, "mean_blocks_per_sm"], 100 * kt.loc[n, "mean_est_achieved_occupancy_ratio"]) for n in kt.index}


def _approx(got, exp):
    """Every expected key present with both values equal (to float precision); exactly these keys."""
    assert sorted(got) == sorted(exp)
    for k, v in exp.items():
        assert got[k] == pytest.approx(v)


def test_gpu_utilization_sm_efficiency_occupancy(tmp_path):
    """Lines 935-1087: one GPU; utilisation (40 + 20) / 120; est. SM efficiency and occupancy (the plugin's
    percent: 0.55); per Kernel + Op row and per kernel the duration-weighted blocks per SM and occupancy
    (a zero-duration call weighs nothing); the utilisation buckets
    (:func:`~nbprof.analysis.utilization.utilization_timeline`, the plugin's bucket rule) and the est. SM
    efficiency ranges (:func:`~nbprof.analysis.kernels.sm_efficiency_ranges`): 72 of 72 equal."""
    t = _load(tmp_path, CASES["gpu_utilization"])
    g = K.gpu_metrics(t)
    assert g["device"].tolist() == [1]
    g = g.iloc[0]
    assert g["utilization_ratio"] == pytest.approx((40 + 20) / 120)
    assert g["est_sm_efficiency_ratio"] == pytest.approx(
        (0.5 * 5 + 1.0 * 5 + 0.6 * 5 + 0.9 * 5 + 0.3 * 20 + 1.0 * 20) / (220 - 100))
    assert 100 * g["est_achieved_occupancy_ratio"] == pytest.approx((0.6 * 10 + 0.1 * 15 + 1.0 * 25 + 0.3 * 20) / 70)
    by_op = _kernel_op_means(t)
    exp = {("void gemmSN_TN_kernel_64addr", "aten::mat_mul"): (0.6, 0.1),
           (KNAME, "aten::mm"): ((0.5 * 10 + 0.3 * 25) / 35, (0.6 * 10 + 1.0 * 25) / 35),
           (KNAME, "aten::mat_mul"): (10.5, 0.3)}
    _approx(by_op, exp)
    _approx(_kernel_means(t), {
        "void gemmSN_TN_kernel_64addr": (0.6, 0.1),
        KNAME: ((0.5 * 10 + 0.3 * 25 + 10.5 * 20) / 55, (0.6 * 10 + 1.0 * 25 + 0.3 * 20) / 55)})
    # lines 1024-1035: 10 µs buckets from the profile's start (100 µs) and a closing (220, 0) point
    tl = u.utilization_timeline(t)
    got = [(100 + _us(a), r) for a, r in zip(tl["ts_ns"], tl["utilization_ratio"])] + [(100 + _us(tl["end_ns"].iloc[-1]), 0)]
    assert got == [(100, 0), (110, 0), (120, 0), (130, 1.0), (140, 1.0), (150, 1.0), (160, 1.0),
                   (170, 0), (180, 0), (190, 0), (200, 1.0), (210, 1.0), (220, 0)]
    # lines 1037-1052: (start, end, value) ranges; the plugin's (170, 200, 0) range is both tools'
    # floating-point residue of adding and removing blocks per SM (2.2e-16 here)
    sm = K.sm_efficiency_ranges(t)
    got = [(100 + _us(a), 100 + _us(b), v) for a, b, v in zip(sm["ts_ns"], sm["end_ns"], sm["sm_efficiency_ratio"])]
    exp = [(130, 135, 0.5), (135, 140, 1.0), (140, 145, 0.6), (145, 150, 0.9), (150, 170, 0.3), (170, 200, 0.0),
           (200, 220, 1.0)]
    assert [g[:2] for g in got] == [e[:2] for e in exp]
    assert [g[2] for g in got] == pytest.approx([e[2] for e in exp], abs=1e-9)


def test_gpu_utilization_kernel_out_of_step(tmp_path):
    """Lines 1089-1140: kernels outside the one step: utilisation 0, no SM efficiency or occupancy (None;
    NaN here); the per-row and per-kernel means still use every kernel. 12 of 12 equal."""
    t = _load(tmp_path, CASES["gpu_utilization_kernel_out_of_step"])
    g = K.gpu_metrics(t)
    assert g["device"].tolist() == [1]
    g = g.iloc[0]
    assert g["utilization_ratio"] == 0.0
    assert np.isnan(g["est_sm_efficiency_ratio"]) and np.isnan(g["est_achieved_occupancy_ratio"])
    _approx(_kernel_op_means(t), {(KNAME, "aten::mat_mul"): (0.5, 0.6), (KNAME, "aten::mm"): (10.5, 0.3)})
    _approx(_kernel_means(t), {KNAME: ((20 * 0.5 + 25 * 10.5) / 45, (20 * 0.6 + 25 * 0.3) / 45)})


def _kernel_op_rows(t):
    kt = K.kernel_table(t, by="kernel_operator")
    rows = set()
    for _, r in kt.iterrows():
        rows.add((r["name"], r["operator"], r["grid"] or None, r["block"] or None, None if r["registers"] < 0 else int(r["registers"]),
                  None if r["shared_mem_bytes"] < 0 else int(r["shared_mem_bytes"]), int(r["calls"]),
                  _us(r["total_ns"]), r["mean_ns"] / 1e3, _us(r["min_ns"]), _us(r["max_ns"])))
    return kt, rows


def _rows(*rows):
    return {(*r[:7], r[7], r[7] / r[6], *r[8:]) for r in rows}


def test_group_by_kernel_columns(tmp_path):
    """Lines 1642-1769: Kernel + Op rows keyed by name, op, grid, block, registers, shared memory
    (34 of 34 equal, rows compared by key)."""
    t = _load(tmp_path, CASES["group_by_kernel_columns"])
    kt, rows = _kernel_op_rows(t)
    assert len(kt) == 3
    assert rows == _rows(
        ("kernel1", "op1", "[16, 1, 1]", "[16, 16, 16]", 18, 0, 2, 15 + 10, 10, 15),
        ("kernel1", "op1", "[16, 1, 1]", "[16, 16, 64]", 18, 0, 1, 13, 13, 13),
        ("kernel1", "op2", "[16, 1, 1]", "[16, 16, 64]", 18, 0, 1, 17, 17, 17))


def test_group_by_kernel_columns_invalid_input(tmp_path):
    """Lines 1771-1931: kernels missing one launch field each are still rows, keyed by what is missing
    (56 of 56 equal; missing is None in the plugin, ''/-1 in nbprof)."""
    t = _load(tmp_path, CASES["group_by_kernel_columns_invalid_input"])
    kt, rows = _kernel_op_rows(t)
    assert len(kt) == 5
    g, b = "[16, 1, 1]", "[16, 16, 16]"
    assert rows == _rows(
        ("kernel1", "op1", None, b, 18, 0, 1, 1, 1, 1), ("kernel1", "op1", g, None, 18, 0, 1, 2, 2, 2),
        ("kernel1", "op1", g, b, None, 0, 1, 3, 3, 3), ("kernel1", "op1", g, b, 18, None, 1, 4, 4, 4),
        ("kernel1", "op1", None, None, None, None, 1, 5, 5, 5))


def test_tensor_core(tmp_path):
    """Lines 1933-2027: Tensor Core eligibility and self / total Tensor Core ratios per op
    (:func:`~nbprof.analysis.kernels.operator_tensor_cores`: 3 x 3), per Kernel + Op row (op, used, op
    eligible: 6) and the ratios 15 / (15 + 10) (2): 18 of 19 equal; the op list's length (3; nbprof 4 with
    ``cudaLaunchKernel``) deliberately differs."""
    t = _load(tmp_path, CASES["tensor_core"])
    ops = O.operator_summary(t)
    assert len(ops) == 4  # tb-plugin: 3
    assert {n: n in pred.TENSOR_CORE_ELIGIBLE_OPS for n in ("aten::conv2d", "op_no_tc", "aten::cudnn_convolution")} == {
        "aten::conv2d": True, "op_no_tc": False, "aten::cudnn_convolution": True}
    kt = K.kernel_table(t, by="kernel_operator").set_index("name")
    assert len(kt) == 2
    got = {n: (kt.loc[n, "operator"], bool(kt.loc[n, "tensor_cores_used"]), bool(kt.loc[n, "operator_tensor_core_eligible"]))
           for n in kt.index}
    assert got == {"kernel_no_tc": ("op_no_tc", False, False),
                   "volta_fp16_s884cudnn_fp16_128x128_ldg8_splitK_relu_f2f_exp_small_nhwc_tn_v1":
                       ("aten::cudnn_convolution", True, True)}
    g = K.gpu_metrics(t).iloc[0]
    assert (g["tensor_core_kernel_ratio"], g["tensor_core_eligible_ratio"]) == pytest.approx((15 / 25, 15 / 25))
    tc = K.operator_tensor_cores(t).set_index("name")
    assert {n: (bool(tc.loc[n, "tensor_core_eligible"]), tc.loc[n, "self_tensor_core_ratio"], tc.loc[n, "total_tensor_core_ratio"])
            for n in tc.index} == {"aten::conv2d": (True, 0, pytest.approx(15 / (15 + 10))), "op_no_tc": (False, 0, 0),
                                   "aten::cudnn_convolution": (True, 1.0, 1.0)}


def test_memory_view_operator_table(tmp_path):
    """Lines 1238-1640: the memory view's operator table, CPU and GPU0: per op self increase, self
    allocation size, self allocation count, increase, allocation size, allocation count, calls
    (:func:`~nbprof.analysis.operators.operator_memory`): 93 of 93 equal (13 ops x 7, the two devices).
    One definition: a device's increases are ``operator_summary``'s memory columns."""
    t = _load(tmp_path, CASES["memory_view"])
    om = O.operator_memory(t)
    assert sorted(set(zip(om["device_type"], om["device"]))) == [(0, -1), (1, 0)]  # 'CPU' and 'GPU0'
    gpu = {"aten::to": [104, 104, 2, 104, 204, 3, 4], "aten::nll_loss_backward": [0, 10, 1, 0, 10, 1, 1],
           "aten::copy_": [0, 100, 1, 0, 100, 1, 1], "aten::addmm": [0, 30, 1, 0, 30, 1, 1],
           "aten::tranas_stride": [0, 50, 1, 0, 50, 1, 1], "aten::transpose": [0, 50, 1, 0, 100, 2, 1],
           "aten::t": [0, 100, 1, 0, 200, 3, 1], "aten::liner": [20, 130, 3, 20, 360, 7, 1]}
    cpu = {"aten::to": [4, 4, 1, 4, 4, 1, 4], "aten::liner": [0, 100, 1, 50, 150, 2, 1],
           "aten::tranas_stride": [50, 50, 1, 50, 50, 1, 1], "aten::transpose": [0, 0, 0, 50, 50, 1, 1],
           "aten::t": [0, 0, 0, 50, 50, 1, 1]}
    cols = ["self_increase_bytes", "self_alloc_bytes", "self_allocs", "increase_bytes", "alloc_bytes", "allocs", "calls"]
    ops = O.operator_summary(t).set_index("name")
    for exp, dt, kind in ((gpu, 1, "device"), (cpu, 0, "host")):
        rows = om[om["device_type"] == dt].set_index("name")
        assert {n: [int(v) for v in rows.loc[n, cols]] for n in exp} == exp
        assert (rows["increase_bytes"] == ops.loc[rows.index, f"{kind}_mem_bytes"]).all()
        assert (rows["self_increase_bytes"] == ops.loc[rows.index, f"self_{kind}_mem_bytes"]).all()


def test_module_hierarchy(tmp_path):
    """Lines 2507-2699: two root modules, ``Conv2`` and ``MyModule``, the latter with one child ``Linear``
    (the aggregated view and the hierarchy of ``nn.Module: <name>`` events): 12 of 12 equal."""
    t = _load(tmp_path, CASES["build_module_hierarchy"])
    mt = MD.module_tree(t)
    roots = mt[mt["parent_id"] < 0].sort_values("name")
    assert roots["name"].tolist() == ["Conv2", "MyModule"]
    kids = mt[mt["parent_id"] == roots.loc[roots["name"] == "MyModule", "node_id"].iloc[0]]
    assert kids["name"].tolist() == ["Linear"]
    names = set(t.events["name"].astype(str))
    assert {"nn.Module: " + n for n in ("Conv2", "MyModule", "Linear")} <= names


#: TestMemoryCurve (lines 2388-2434): [ts µs, Device Type, Device Id, Addr, Bytes, Total Allocated, Total Reserved]
MEM_CPU = [[1, 0, 0, 1, 4, 4, 0], [20, 0, 0, 1, -4, 0, 0], [100, 0, 0, 2, 8000, 8000, 0], [200, 0, 0, 2, -8000, 0, 0],
           [300, 0, 0, 3, 4, 4, 0], [400, 0, 0, 4, 16, 20, 0], [500, 0, 0, 5, 4000, 4020, 0], [600, 0, 0, 4, -16, 4004, 0],
           [700, 0, 0, 7, 80, 4084, 0], [800, 0, 0, 3, -4, 4080, 0], [900, 0, 0, 7, -80, 4000, 0], [905, 0, 0, 4, -4000, 0, 0]]
MEM_GPU = [[2, 1, 0, 11, 400, 400, 512], [22, 1, 0, 11, -400, 0, 512], [105, 1, 0, 12, 5000, 5000, 10240],
           [106, 1, 0, 13, 3000, 8000, 10240], [205, 1, 0, 12, -5000, 3000, 10240], [401, 1, 0, 14, 1024, 4024, 10240],
           [499, 1, 0, 15, 4, 4028, 10240], [501, 1, 0, 13, -3000, 1028, 10240], [502, 1, 0, 15, -4, 1024, 10240],
           [906, 1, 0, 14, -1024, 0, 10240]]


@pytest.fixture
def memory_curves(tmp_path):
    ev = [{"ph": "i", "s": "t", "name": "[memory]", "pid": 0, "tid": 0, "ts": d[0],
           "args": {"Device Type": d[1], "Device Id": d[2], "Addr": d[3], "Bytes": d[4], "Total Allocated": d[5],
                    "Total Reserved": d[6]}} for d in sorted(MEM_CPU + MEM_GPU, key=lambda e: e[0])]
    t = _load(tmp_path, ev)
    c = M.memory_curve(t)
    rows = {dev: [[_us(r.ts_ns), int(r.total_allocated), int(r.total_reserved)] for r in g.itertuples()]
            for dev, g in c.groupby("device_type")}
    return t, rows


def test_memory_curve_no_step_plot(memory_curves):
    """Lines 2436-2464: the profile starts at the first event (1 µs); per device the curve's times from
    there, totals allocated and reserved: 71 of 71 equal. The peak per device (not asserted by the peer,
    read from its data): 8,000 bytes on both, at 100 µs (CPU) and 106 µs (GPU0)."""
    t, rows = memory_curves
    assert sorted(rows) == [0, 1]
    assert rows[0][0][0] == 0  # times from the profile's start, the first event (1 µs)
    for dev, data in ((0, MEM_CPU), (1, MEM_GPU)):
        assert rows[dev] == [[d[0] - 1, d[5], d[6]] for d in data]
    pk = M.memory_peak(t).set_index("device_type")
    assert pk["peak_allocated_bytes"].tolist() == [8000, 8000]
    assert [_us(pk.loc[d, "ts_ns"]) for d in (0, 1)] == [100 - 1, 106 - 1]


def _step_points(rows):
    """The corners of ``step(mode="after")``: each point, then (next time, this value) before the next."""
    out = []
    for i, r in enumerate(rows):
        out.append(r)
        if i + 1 < len(rows):
            out.append([rows[i + 1][0], r[1], r[2]])
    return out


def test_memory_curve_step_plot(memory_curves):
    """Lines 2466-2504 (``patch_for_step_plot=True``): 2n - 1 points, each original point followed by the
    next time with this point's values: 104 of 104 equal (the peer's GPU loop checks its first 10 points)."""
    _t, rows = memory_curves
    for dev, data in ((0, MEM_CPU), (1, MEM_GPU)):
        pts = _step_points(rows[dev])
        assert len(pts) == 2 * len(data) - 1
        for i, p in enumerate(pts):
            src = data[i // 2] if i % 2 == 0 else [data[i // 2 + 1][0], *data[i // 2][1:]]
            assert p == [src[0] - 1, src[5], src[6]]


def test_counts():
    """The note's numbers: values equal / asserted over the cases of this file (views nbprof has)."""
    eq, asserted, absent = (sum(c[i] for c in COUNTS.values()) for i in range(3))
    assert (eq, asserted, absent) == (637, 642, 2)

# Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
"""Error translation: refdec's error family as Python exceptions with the C++ messages."""

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

import refdec


def test_version_is_the_headers():
    """refdec.__version__ is include/refdec/version.hpp's, the one place the version lives."""
    header = (Path(__file__).resolve().parents[2] / "include" / "refdec" / "version.hpp").read_text()
    numbers = [re.search(rf"#define REFDEC_VERSION_{part} (\d+)", header).group(1) for part in ("MAJOR", "MINOR", "PATCH")]
    assert refdec.__version__ == ".".join(numbers)


def test_hierarchy():
    assert issubclass(refdec.ArgumentError, refdec.Error) and issubclass(refdec.ArgumentError, ValueError)
    assert issubclass(refdec.IoError, refdec.Error) and issubclass(refdec.IoError, OSError)
    assert issubclass(refdec.Error, RuntimeError)
    assert refdec.Error.__module__ == "refdec" and refdec.ArgumentError.__doc__


def test_argument_errors_are_value_errors_with_the_cpp_message():
    with pytest.raises(refdec.ArgumentError) as info:
        refdec.LlmaDrafter(min_match=0)
    assert isinstance(info.value, ValueError)
    message = str(info.value)
    assert message.startswith("refdec: LLMA: min_match must be at least 1, got 0 (") and "llma.hpp:" in message


def test_io_errors_are_os_errors(tmp_path):
    with pytest.raises(OSError) as info:
        refdec.Datastore.open(tmp_path / "none.bin")
    assert isinstance(info.value, refdec.IoError) and "none.bin" in str(info.value)


def test_io_errors_of_the_torch_part_are_the_same_os_errors(tmp_path, torch):
    with pytest.raises(OSError) as info:
        refdec.LlamaModel.load_llama2c(tmp_path / "none.bin")
    assert isinstance(info.value, refdec.IoError) and "none.bin" in str(info.value)
    (tmp_path / "short.bin").write_bytes(b"\x01\x02")
    with pytest.raises(refdec.IoError, match="too short for its header"):
        refdec.LlamaModel.load_llama2c(tmp_path / "short.bin")


def test_libtorch_errors_are_runtime_errors_without_the_cpp_backtrace(torch):
    c = refdec.LlamaConfig()
    c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab_size, c.max_seq_len = 8, 16, 1, 2, 2, 11, 16
    # at::linear: libtorch 1.13 has no float16 matmul on the CPU (the packed kernels have one)
    model = refdec.LlamaModel.random(c, 0, torch.float16, linear="aten")
    session = refdec.Session(model)
    session.add([1])
    try:
        session.step()
    except RuntimeError as e:
        assert "Exception raised from" not in str(e)
    # (libtorch 2.x runs float16 on the CPU: then there is nothing to translate)


def test_linear_kernels_say_which_ran_and_reject_unknown_names(torch):
    c = refdec.LlamaConfig()
    c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab_size, c.max_seq_len = 16, 32, 1, 2, 2, 11, 16
    fp32 = refdec.LlamaModel.random(c, 0)
    assert fp32.linear_kernel == "aten" and "bf16 or fp16" in fp32.linear_path
    bf16 = refdec.LlamaModel.random(c, 0, torch.bfloat16)
    assert bf16.linear_kernel in ("onednn", "stream", "aten") and bf16.linear_path.startswith(bf16.linear_kernel)
    assert refdec.LlamaModel.random(c, 0, torch.bfloat16, linear="aten").linear_kernel == "aten"
    with pytest.raises(ValueError, match="unknown linear kernel 'mkl'"):
        refdec.LlamaModel.random(c, 0, torch.bfloat16, linear="mkl")
    with pytest.raises(ValueError, match='LinearKernel "packed" cannot run'):
        refdec.LlamaModel.random(c, 0, torch.float32, linear="packed")



def test_a_linear_choice_kept_as_text_is_taken_back(torch):
    c = refdec.LlamaConfig()
    c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab_size, c.max_seq_len = 16, 32, 1, 2, 2, 11, 16
    assert refdec.LlamaModel.random(c, 0).linear_choice is None  # float32: at::linear, nothing chosen
    measured = refdec.LlamaModel.random(c, 0, torch.bfloat16)
    if measured.linear_kernel == "aten":
        pytest.skip("no packed kernel runs here: " + measured.linear_path)
    again = refdec.LlamaModel.random(c, 0, torch.bfloat16, linear_choice=measured.linear_choice)
    assert again.linear_choice == measured.linear_choice
    assert again.linear_path == measured.linear_choice + " (given)"
    with pytest.raises(ValueError, match="unknown tile set 'avx3'"):
        refdec.LlamaModel.random(c, 0, torch.bfloat16, linear_choice="stream (avx3 for every row count)")

def test_an_unfinished_tree_is_refused_not_read():
    tree = refdec.LinearTree()
    tree.add_node(1, -1)
    tree.add_node(2, 0)  # no finish(): no links or mask yet
    assert not tree.finished
    with pytest.raises(ValueError, match="tree of 2 nodes is not finished"):
        refdec.plan_step([tree], [0])
    tree.finish()
    assert tree.finished
    assert refdec.plan_step([tree], [0]).num_rows == 2


def test_type_errors_stay_type_errors():
    with pytest.raises(TypeError):
        refdec.plan_step([1, 2], [0, 0])


def test_bytes_are_not_token_ids_and_bad_references_are_named():
    driver = refdec.StepDriver(100, 64)
    with pytest.raises(TypeError):
        driver.add(bytearray(b"\x01\x02"))
    with pytest.raises(TypeError):
        driver.add(b"\x01\x02")
    with pytest.raises(ValueError, match="reference 1 is not a sequence of token ids \\(got <class 'dict'>\\)"):
        driver.add([1], references=[[2, 3], {"a": 1}])
    assert driver.active == 0


def test_session_sizes_are_checked(torch):
    c = refdec.LlamaConfig()
    c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab_size, c.max_seq_len = 16, 32, 1, 2, 2, 11, 16
    model = refdec.LlamaModel.random(c, 0)
    with pytest.raises(ValueError, match="capacity and num_blocks must be >= 0 \\(0: the default\\) and block_size >= 1, got -5, 0, 16"):
        refdec.Session(model, capacity=-5)


def test_a_dtype_is_a_torch_dtype(torch):
    with pytest.raises(ValueError, match="expected a torch.dtype"):
        refdec.LlamaModel.load_llama2c("x.bin", "float32")


def test_a_chooser_returning_no_token_id_is_a_type_error_naming_it():
    tree = refdec.LinearTree.chain([3, 4])
    plan = refdec.plan_step([tree], [0], 10)
    with pytest.raises(TypeError, match=r"choose\(node, depth\) must return a token id \(int\), got str at node 0, depth 0"):
        refdec.accept_with(plan, 0, lambda node, depth: "4")
    with pytest.raises(TypeError, match="got NoneType"):
        refdec.accept_with(plan, 0, lambda node, depth: None)
    assert refdec.accept_with(plan, 0, lambda node, depth: 4).tokens == [4, 4]  # draft 4 accepted, then the bonus


def run_python(code):
    """Runs `code` in a fresh interpreter; returns its exit status and standard error."""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    return run.returncode, run.stderr


def test_an_interpreter_without_torch_is_told_what_the_torch_part_needs():
    # torch made unimportable, as in a venv or pyenv python without it: the rest of refdec works.
    rc, err = run_python("import sys; sys.modules['torch'] = None; import refdec; refdec.LinearTree.chain([1]); refdec.Session")
    assert rc != 0 and "ImportError: refdec.Session is not available: " in err, err
    if importlib.util.find_spec("refdec._torch") is None:
        assert "refdec was built without its torch part" in err, err
    else:
        assert "it needs torch (Debian 12: python3-torch), and this interpreter" in err and "cannot import it" in err, err


def test_another_torch_than_the_one_built_against_is_named(torch):
    fake = "import sys, types; t = types.ModuleType('torch'); t.__version__ = '0.0'; sys.modules['torch'] = t"
    rc, err = run_python(fake + "; import refdec; refdec.LinearTree.chain([1]); refdec.LlamaModel")
    assert rc != 0 and "ImportError: refdec.LlamaModel is not available: refdec: this interpreter" in err, err
    assert "has torch 0.0" in err and "refdec._torch was built for" in err and "with torch" in err, err
    assert "initialization failed" not in err, err

"""pytest setup: tests marked `gpu` need a CUDA GPU and are skipped, with the reason, where there is none."""
import pytest

def pytest_collection_modifyitems(config, items):
    gpu_tests = [i for i in items if "gpu" in i.keywords]
    if not gpu_tests: return
    try:
        import torch
        has_gpu = torch.cuda.is_available()
    except Exception: has_gpu = False
    if has_gpu: return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (torch.cuda.is_available() is False): NCCL tests run on a GPU machine")
    for item in gpu_tests: item.add_marker(skip)


@pytest.fixture(scope="session")
def walkthroughs(tmp_path_factory):
    "Each walkthrough run once under papermill (world 2, gloo), shared by the tests that read its outcomes."
    from walkthrough_runs import WalkthroughRuns
    return WalkthroughRuns(tmp_path_factory.mktemp("walkthroughs"))

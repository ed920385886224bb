"""A real Jupyter kernel for tests: run code in it, read what it printed, interrupt, restart or kill it."""
import os, queue, sys
from jupyter_client.manager import start_new_kernel

class Kernel:
    "A python3 kernel started with jupyter_client, as JupyterLab starts one."
    def __init__(self, cwd: str):
        self.km, self.kc = start_new_kernel(kernel_name="python3", cwd=str(cwd))

    def run(self, code: str, timeout_s: float = 120) -> str:
        "Execute `code`; return its stdout; raise with the traceback if it failed."
        msg_id, out = self.kc.execute(code), []
        while True:
            m = self.kc.get_iopub_msg(timeout=timeout_s)
            if m["parent_header"].get("msg_id") != msg_id: continue
            t, c = m["msg_type"], m["content"]
            if t == "stream" and c["name"] == "stdout": out.append(c["text"])
            elif t == "error": raise RuntimeError("kernel error:\n" + "\n".join(c["traceback"]))
            elif t == "status" and c["execution_state"] == "idle": return "".join(out)

    def start(self, code: str):
        "Execute `code` without waiting for it (a cell that is still running)."
        return self.kc.execute(code)

    def wait_for_output(self, msg_id: str, text: str, timeout_s: float = 60):
        "Block until the cell `msg_id` has printed `text`."
        seen = ""
        while text not in seen:
            m = self.kc.get_iopub_msg(timeout=timeout_s)
            if m["parent_header"].get("msg_id") == msg_id and m["msg_type"] == "stream": seen += m["content"]["text"]

    def wait_for_display(self, msg_id: str, mime: str, timeout_s: float = 60) -> dict:
        "Block until the cell `msg_id` has displayed something of type `mime`; return that data."
        while True:
            m = self.kc.get_iopub_msg(timeout=timeout_s)
            if m["parent_header"].get("msg_id") == msg_id and m["msg_type"] == "display_data" and mime in m["content"]["data"]:
                return m["content"]["data"][mime]

    @property
    def pid(self) -> int: return self.km.provisioner.process.pid

    def interrupt(self): self.km.interrupt_kernel()
    def restart(self): self.km.restart_kernel(now=False)
    def shutdown(self):
        try: self.kc.stop_channels()
        finally: self.km.shutdown_kernel(now=True)

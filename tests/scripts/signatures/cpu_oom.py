"""A rank whose address space is capped (as a container or `ulimit -v` would) asks for a large CPU tensor."""
import resource, torch, torch.distributed as dist

def main():
    dist.init_process_group("gloo")
    try:
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, resource.getrlimit(resource.RLIMIT_AS)[1]))
        acts = torch.empty(8 << 30, dtype=torch.uint8)   # 8 GiB of activations
        print(acts.shape)
    finally:
        dist.destroy_process_group()

if __name__ == "__main__": main()

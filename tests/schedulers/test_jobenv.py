"""The job environment's allow-list (schedulers/jobenv.py), shared by every executor."""

from __future__ import annotations

from schedulers.jobenv import job_environment


def test_only_allowed_names_pass_and_the_request_adds_its_own() -> None:
    portal = {"PATH": "/usr/bin", "HOME": "/home/svc", "LANG": "C.UTF-8", "LC_ALL": "C", "OMP_NUM_THREADS": "4",
              "NCCL_SOCKET_IFNAME": "ib0", "FLOWTRAIN_DATA_ROOT": "/data", "AWS_SECRET_ACCESS_KEY": "k",
              "FLOWTRAIN_CONFIG": "/etc/ft.toml", "SLURM_JOB_ID": "5", "SBATCH_EXPORT": "ALL",
              "PYTHONPATH": "/srv/portal", "CUDA_VISIBLE_DEVICES": "0,1"}
    env = job_environment(portal, extra=[("FLOWTRAIN_RUN_DIR", "/runs/1")])
    assert env == {"PATH": "/usr/bin", "HOME": "/home/svc", "LANG": "C.UTF-8", "LC_ALL": "C", "OMP_NUM_THREADS": "4",
                   "NCCL_SOCKET_IFNAME": "ib0", "SLURM_UMASK": "0077", "FLOWTRAIN_RUN_DIR": "/runs/1"}

// Package deploy holds no code: it checks the deployment files beside it, which run
// voxpipe unattended (README "Scheduled and clustered operation"):
//
//   - systemd/: voxpipe-watch.service (voxpipe watch, Type=notify), voxpipe-batch.service
//     and voxpipe-batch.timer (voxpipe run every 15 minutes);
//   - slurm/voxpipe-array.sbatch: a Slurm job array, one shard of the batch per task;
//   - k8s/indexed-job.yaml: a Kubernetes Indexed Job, one shard per pod, on a shared volume.
//
// Its tests parse the Kubernetes manifest and read the sbatch script and the units for the
// settings the sharding depends on. The full checks run the real tools:
// scripts/check-units.sh (systemd-analyze verify) and scripts/slurm-test.sh (a single-node
// Slurm cluster running the array).
package deploy

"""voxpipe_twin: the PyTorch twin of voxpipe's attention-gate segmentation network.

Modules: model (AttnGateNet, weights file, slab inference; needs torch), nifti, normalize,
safetensors_io, reference (numpy-only). Import the torch parts from voxpipe_twin.model.
"""

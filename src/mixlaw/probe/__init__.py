"""Probe runs: corpora, tokenizer, mixture sampler, small GPTs, (continual) pre-training and sweeps.

Import the submodules (``mixlaw.probe.corpora``, ``.data``, ``.model``, ``.train``, ``.sweep``); importing this
package loads nothing heavy.
"""

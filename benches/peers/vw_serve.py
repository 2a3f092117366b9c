"""Runs Vowpal Wabbit with the given command line (e.g. --daemon): the PyPI wheel has no `vw` binary."""
import sys

import vowpalwabbit

workspace = vowpalwabbit.Workspace(arg_list=sys.argv[1:])
workspace.run_parser()
workspace.finish()

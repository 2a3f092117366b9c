"""kernels: the numerical kernels and the learner's intake, on one core.

- criterion: `benches/kernels.rs` (sparse dot/axpy, H_k, one epoch of each solver, the certificate walks),
  criterion's estimate per benchmark (ns);
- learner_insert: `benches/harness/learner_insert.rs`, thread CPU per sample handed to a streaming
  learner (SDIHT, mirror), with and without solver steps between calls, and heap calls per sample.
"""
from common import Bench, Command, Needs, Suite, criterion, key_values


def needs(ctx):
    return Needs(examples=["learner_insert"], benches=["kernels"])


def criterion_cmd(ctx, build):
    quick = ["--warm-up-time", "0.2", "--measurement-time", "0.5"] if ctx.quick else []
    return Command([build.bench("kernels"), "--bench", *quick],
                   env={"CRITERION_HOME": ctx.dir("criterion", build.key)})


def insert_cmd(ctx, build):
    return Command([build.example("learner_insert")] + (["sdiht"] if ctx.quick else []))


def benches(ctx):
    return [
        Bench("criterion", "benches/kernels.rs: sparse dot/axpy, H_k, solver epochs, certificate (ns)",
              criterion_cmd, parse=criterion, runs=(1, 3)),
        Bench("learner_insert", "thread CPU per sample of StreamingLearner::insert_batches (quick: SDIHT)",
              insert_cmd, parse=lambda o, e: key_values(o, e, ("solver", "per_call", "steps_per_call")),
              runs=(1, 3)),
    ]


SUITE = Suite("kernels", "sparse kernels, H_k, solver epochs, certificates (criterion); learner intake CPU",
              needs, benches)

"""The human proxy: it predicts the decider's answer at each gate and answers alone where it
has earned that, measured.

`proxy.Proxy` is what the engine consults before a gate is asked (orchestrator/jobs/driver.py)
and what the edge tells of an `/override` or a job's `auto`; `autonomy` is the rule, pure;
`brief` what its model reads and writes; `decisions` and `overrides` its record in the store;
`stats` is `teaparty proxy stats`.
"""

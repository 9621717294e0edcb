"""The human proxy: it predicts the decider's answer at each gate and answers alone where it
has earned that, measured.

`autonomy` is the rule, pure; `brief` what its model reads and writes.
"""

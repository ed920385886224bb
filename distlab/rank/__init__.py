"Code that runs inside a rank: the shim for unmodified scripts, the scenario worker, events, the collective tape and ledger."

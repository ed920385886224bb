"The launcher's reading of a run: the analysis of every rank's events, the diagnosis rules, known error signatures."

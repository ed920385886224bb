"Models, synthetic data, guards (and trainers) that scenarios and users' own loops call."

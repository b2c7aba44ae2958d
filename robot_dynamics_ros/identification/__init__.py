"""System identification: regressor, base parameters, physically consistent estimation, data I/O."""

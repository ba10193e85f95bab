"""What a rank measures: timing statistics, communication by category, memory by kind."""

"""What a person looks at: report.html per run, results/index.html across runs, JUnit XML."""

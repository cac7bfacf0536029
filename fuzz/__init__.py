"""Coverage-guided fuzzing of kbatch (atheris). See fuzz/README.md."""

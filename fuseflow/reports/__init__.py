"""Reports over the whole toolchain: RTL-vs-simulator correlation (:mod:`.correlation`) over kernel suites
(:mod:`.suites`), with a small progress bar (:mod:`.progress`)."""

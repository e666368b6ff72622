tessel: error: operands is required
(run `tessel --help` or `tessel COMMAND --help` for usage)

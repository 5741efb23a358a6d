"""asynctrain's CSV ExampleGen: schema-typed, parallel CSV to tf.Example conversion on Beam that
loses no row. `component.CsvExampleGen` is the TFX component; `csv_source.CsvToExampleFiles` the
Beam transform it runs; `cli` the standalone command."""

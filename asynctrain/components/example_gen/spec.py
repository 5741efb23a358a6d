"""The contract of asynctrain's CSV ExampleGen: parameters, outputs, and the names of the row
counts and files it records. Every key lives here, once.

Stock ExampleGen's keys (input_base, input_config, output_config, range_config, output formats,
examples) are reused as they are, so TFX's FileBasedDriver resolves spans and versions for this
component exactly as for stock.
"""

from tfx.proto import example_gen_pb2, range_config_pb2
from tfx.types import standard_artifacts, standard_component_specs
from tfx.types.component_spec import ChannelParameter, ComponentSpec, ExecutionParameter

from asynctrain.components.example_gen import dead_letter

INPUT_BASE_KEY = standard_component_specs.INPUT_BASE_KEY
INPUT_CONFIG_KEY = standard_component_specs.INPUT_CONFIG_KEY
OUTPUT_CONFIG_KEY = standard_component_specs.OUTPUT_CONFIG_KEY
RANGE_CONFIG_KEY = standard_component_specs.RANGE_CONFIG_KEY
OUTPUT_DATA_FORMAT_KEY = standard_component_specs.OUTPUT_DATA_FORMAT_KEY
OUTPUT_FILE_FORMAT_KEY = standard_component_specs.OUTPUT_FILE_FORMAT_KEY
EXAMPLES_KEY = standard_component_specs.EXAMPLES_KEY
# Each split's TFDV statistics, as StatisticsGen writes them (`split_statistics`).
STATISTICS_KEY = standard_component_specs.STATISTICS_KEY
# The same rows as `examples`, as Parquet files of Arrow columns (TFX's FORMAT_PARQUET payload, one
# row group per chunk): what Transform analyzes (`decoded_columns`).
PARQUET_EXAMPLES_KEY = 'parquet_examples'
# StatisticsGen's property on its artifact: {split: sample rate} (tfx.components.statistics_gen).
SAMPLE_RATE_BY_SPLIT_PROPERTY = 'sample_rate_by_split'

SCHEMA_PATH_KEY = 'schema_path'
DELIMITER_KEY = 'delimiter'
# '' means cells are never quoted.
QUOTE_CHAR_KEY = 'quote_char'
# JSON list of names; empty when every file starts with a header row.
COLUMN_NAMES_KEY = 'column_names'
# JSON list of cell texts that mean "missing" besides the empty cell.
NULL_MARKERS_KEY = 'null_markers'
MAX_BAD_FRACTION_KEY = 'max_bad_fraction'
# The label's column: a row without a valid label goes to the dead letter ('' for none).
LABEL_COLUMN_KEY = 'label_column'
# Bytes of CSV per chunk: the unit of parallel work, and one output file per split per chunk, so
# the number of files a reader (Transform, the ExampleBatcher, the Evaluator) can spread over
# workers. Unset: `csv_source.DEFAULT_CHUNK_BYTES`.
CHUNK_BYTES_KEY = 'chunk_bytes'

# Custom properties set on the examples artifact. rows_read == rows_written + rows_rejected.
ROWS_READ_PROPERTY = 'rows_read'
ROWS_REJECTED_PROPERTY = 'rows_rejected'
ROWS_WRITTEN_PROPERTY = 'rows_written'
ROWS_WRITTEN_SPLIT_PROPERTY_PREFIX = 'rows_written_'  # + split name, e.g. rows_written_train.

# The LogRecord attribute that carries the row counts (`dead_letter.read_summary`'s dict) on the
# summary's log line, for a runner's progress line (`asynctrain.pipelines.local_runner`).
ROWS_RECORD_ATTRIBUTE = 'rows'

# Beside `Split-<name>/` in the examples artifact's directory (defined with the framework-free
# writer so that the CLI and Beam workers need not import TFX).
DEAD_LETTER_DIR_NAME = dead_letter.DEAD_LETTER_DIR_NAME
SUMMARY_FILE_NAME = dead_letter.SUMMARY_FILE_NAME


class CsvExampleGenSpec(ComponentSpec):
    """Parameters and outputs of asynctrain's CSV ExampleGen."""

    PARAMETERS = {
        INPUT_BASE_KEY: ExecutionParameter(type=str),
        INPUT_CONFIG_KEY: ExecutionParameter(type=example_gen_pb2.Input),
        OUTPUT_CONFIG_KEY: ExecutionParameter(type=example_gen_pb2.Output),
        OUTPUT_DATA_FORMAT_KEY: ExecutionParameter(type=int),
        OUTPUT_FILE_FORMAT_KEY: ExecutionParameter(type=int),
        RANGE_CONFIG_KEY: ExecutionParameter(type=range_config_pb2.RangeConfig, optional=True),
        SCHEMA_PATH_KEY: ExecutionParameter(type=str, optional=True),
        DELIMITER_KEY: ExecutionParameter(type=str),
        QUOTE_CHAR_KEY: ExecutionParameter(type=str),
        COLUMN_NAMES_KEY: ExecutionParameter(type=str),
        NULL_MARKERS_KEY: ExecutionParameter(type=str),
        MAX_BAD_FRACTION_KEY: ExecutionParameter(type=float),
        LABEL_COLUMN_KEY: ExecutionParameter(type=str, optional=True),
        CHUNK_BYTES_KEY: ExecutionParameter(type=int, optional=True),
    }
    INPUTS = {}
    OUTPUTS = {
        EXAMPLES_KEY: ChannelParameter(type=standard_artifacts.Examples),
        STATISTICS_KEY: ChannelParameter(type=standard_artifacts.ExampleStatistics),
        # Only when the component is asked for it (`parquet_copy`).
        PARQUET_EXAMPLES_KEY: ChannelParameter(type=standard_artifacts.Examples, optional=True),
    }

"""The training progress line: plain lines at most every interval when output is not a terminal,
an in-place tqdm bar when it is, with steps, examples/s, loss and staleness."""

import io

from asynctrain.components.trainer.training import progress as progress_lib


def test_plain_output_prints_a_line_per_interval_and_the_last_state():
    out = io.StringIO()
    progress = progress_lib.TrainingProgress(
        100, initial_step=20, out=out, plain_interval=3600, interactive=False
    )

    progress.update(40, examples_per_sec=1234.4, loss=0.5, staleness_mean=1.5)
    # Within the interval: nothing printed.
    progress.update(60, examples_per_sec=2000.0, loss=0.25, staleness_mean=0.5)
    progress.close()

    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert '\r' not in out.getvalue()
    assert lines[0].startswith('train:')
    assert '40/100' in lines[0]
    assert '1,234 ex/s, loss 0.5000, staleness 1.50' in lines[0]
    assert '60/100' in lines[1]
    assert 'loss 0.2500, staleness 0.50' in lines[1]


def test_plain_output_prints_the_end_at_once_and_not_twice():
    out = io.StringIO()
    progress = progress_lib.TrainingProgress(50, out=out, plain_interval=3600, interactive=False)

    progress.update(10, 100.0, 0.7, 0.0)
    progress.update(50, 100.0, 0.6, 0.0)
    progress.close()

    lines = out.getvalue().splitlines()
    assert ['10/50' in lines[0], '50/50' in lines[1]] == [True, True]
    assert len(lines) == 2


def test_a_terminal_gets_a_tqdm_bar_updated_in_place():
    out = io.StringIO()
    progress = progress_lib.TrainingProgress(30, out=out, interactive=True)

    progress.update(15, 500.0, 0.4, 2.0)
    progress.update(30, 500.0, 0.3, 1.0)
    progress.close()

    text = out.getvalue()
    assert '\r' in text
    final = text.split('\r')[-1]
    assert '30/30' in final
    assert 'loss 0.3000, staleness 1.00' in final

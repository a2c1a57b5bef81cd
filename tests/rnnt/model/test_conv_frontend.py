"""rnnt.model.conv_frontend: output lengths are the 3x3 stride-2 convolution arithmetic floor((L - 3) / 2) + 1
worked by hand and equal to the frames torch.nn.Conv2d itself puts out, 0 where it puts out none; a front end
too narrow for its layers is named; on a padded batch of real LibriSpeech fbank each utterance comes out as a
plain Conv2d + ReLU stack makes it alone, each channel's frequencies side by side, whatever fills the padding;
an output frame reads exactly `stride + overlap` input frames from t * stride."""

import pytest
import torch

from rnnt.model.conv_frontend import Conv2dSubsampling, conv_out_length, conv_output_frames, conv_problems

@pytest.fixture(scope="module")
def fbanks(short_fbanks) -> list[torch.Tensor]:
    return short_fbanks


def torch_frames(frames: int, layers: int) -> int:
    """Frames that torch.nn.Conv2d(kernel 3, stride 2) layers put out for `frames` input frames (0: it refuses)."""
    x = torch.zeros(1, 1, frames, 40)
    for _ in range(layers):
        try:
            x = torch.nn.Conv2d(1, 1, kernel_size=3, stride=2)(x)
        except RuntimeError as error:
            assert "Kernel size can't be greater than actual input size" in str(error)
            return 0
    return x.shape[2]


@pytest.mark.parametrize("length,expected", [(3, 1), (4, 1), (5, 2), (6, 2), (7, 3), (80, 39), (101, 50)])
def test_one_convolution_by_hand(length, expected):
    assert conv_out_length(length) == expected == torch_frames(length, 1)


def test_one_convolution_on_a_tensor_of_lengths():
    lengths = torch.tensor([3, 4, 5, 6, 7, 80, 101])
    assert conv_out_length(lengths).tolist() == [1, 1, 2, 2, 3, 39, 50]


@pytest.mark.parametrize("layers", [1, 2, 3])
def test_output_frames_are_what_conv2d_puts_out(layers):
    for frames in range(1, 70):
        assert conv_output_frames(frames, layers) == torch_frames(frames, layers), frames


@pytest.mark.parametrize("frames,layers,expected", [(6, 2, 0), (7, 2, 1), (2, 1, 0), (0, 1, 0), (14, 3, 0),
                                                    (15, 3, 1), (59, 2, 14), (91, 2, 22), (35, 2, 8), (91, 3, 10)])
def test_output_frames_by_hand(frames, layers, expected):
    # 59 -> 29 -> 14; 91 -> 45 -> 22 -> 10; 35 -> 17 -> 8; 14 -> 6 -> 2 -> 0
    assert conv_output_frames(frames, layers) == expected


@pytest.mark.parametrize("input_dim,layers,fine", [(80, 2, True), (7, 2, True), (6, 2, False), (15, 3, True),
                                                   (14, 3, False), (80, 0, False), (3, 1, True), (2, 1, False)])
def test_problems_of_a_front_end_too_narrow_or_without_layers(input_dim, layers, fine):
    expected = [] if fine else [f"model.encoder.conv_layers {layers} strided convolutions need a wider input than "
                                f"model.encoder.input_dim {input_dim} (and at least one layer)"]
    assert conv_problems(input_dim, layers) == expected


@pytest.mark.parametrize("input_dim,channels,layers,output_dim", [(80, 4, 2, 4 * 19), (80, 8, 3, 8 * 9),
                                                                  (80, 2, 1, 2 * 39), (7, 5, 2, 5 * 1)])
def test_output_dim_stride_and_overlap(input_dim, channels, layers, output_dim):
    frontend = Conv2dSubsampling(input_dim, channels, layers)
    assert frontend.output_dim == output_dim
    assert (frontend.stride, frontend.overlap) == (2 ** layers, 2 ** layers - 1)


def test_a_front_end_without_layers_or_too_narrow_is_refused():
    with pytest.raises(ValueError, match="encoder.conv_layers must be >= 1 with a conv front end, got 0"):
        Conv2dSubsampling(80, 4, 0)
    with pytest.raises(ValueError, match="encoder.input_dim 6 is too narrow for 2 strided convolutions"):
        Conv2dSubsampling(6, 4, 2)


def alone(frontend: Conv2dSubsampling, feats: torch.Tensor) -> torch.Tensor:
    """One utterance (T, F) through a plain Conv2d + ReLU stack holding the front end's weights, then each
    output frame as channel 0's frequencies, channel 1's, ... side by side."""
    stack = []
    for conv in frontend.convs:
        plain = torch.nn.Conv2d(conv.in_channels, conv.out_channels, kernel_size=3, stride=2)
        plain.load_state_dict(conv.state_dict())
        stack += [plain, torch.nn.ReLU()]
    planes = torch.nn.Sequential(*stack)(feats[None, None])[0]  # (C, T', F')
    return torch.cat(list(planes), dim=1)


@pytest.mark.parametrize("layers", [1, 2, 3])
def test_each_real_utterance_comes_out_as_alone_whatever_the_padding(fbanks, layers):
    torch.manual_seed(layers)
    frontend = Conv2dSubsampling(80, 3, layers)
    lengths = torch.tensor([len(f) for f in fbanks])
    for fill in (0.0, 1e4, float("nan")):
        batch = torch.full((3, 95, 80), fill)
        for b, f in enumerate(fbanks):
            batch[b, :len(f)] = f
        with torch.no_grad():
            out, out_lengths = frontend(batch, lengths)
            assert out.shape == (3, conv_output_frames(95, layers), frontend.output_dim)
            assert out_lengths.tolist() == [conv_output_frames(len(f), layers) for f in fbanks]
            for b, f in enumerate(fbanks):
                expected = alone(frontend, f)
                assert expected.shape == (int(out_lengths[b]), frontend.output_dim)
                torch.testing.assert_close(out[b, :int(out_lengths[b])], expected, rtol=1e-5, atol=1e-5)


def test_an_utterance_too_short_for_the_layers_gets_length_zero(fbanks):
    frontend = Conv2dSubsampling(80, 2, 2)
    feats = fbanks[0][None, :20].repeat(4, 1, 1)
    _, lengths = frontend(feats, torch.tensor([20, 6, 2, 0]))
    assert lengths.tolist() == [4, 0, 0, 0]  # 20 -> 9 -> 4; 6 -> 2 -> 0; 2 -> 0; 0 -> (-1, clamped)
    for layers, frames in ((2, 6), (2, 1), (3, 14)):  # alone, under the receptive field (7, 15): as in the batch
        frontend = Conv2dSubsampling(80, 2, layers)
        out, lengths = frontend(fbanks[0][None, :frames], torch.tensor([frames]))
        assert lengths.tolist() == [0] and out.shape[0] == 1 and out.shape[2] == frontend.output_dim
    out, lengths = Conv2dSubsampling(80, 2, 2)(fbanks[0][None, :7], torch.tensor([7]))
    assert lengths.tolist() == [1] and out.shape[1] == 1  # the receptive field itself: one frame, no padding


@pytest.mark.parametrize("layers", [1, 2, 3])
def test_an_output_frame_reads_stride_plus_overlap_frames_from_t_times_stride(layers):
    """With positive weights, biases and inputs every ReLU passes, so an input frame has a gradient exactly
    where the output frame reads it."""
    torch.manual_seed(0)
    frontend = Conv2dSubsampling(16, 2, layers)
    with torch.no_grad():
        for conv in frontend.convs:
            conv.weight.abs_()
            conv.bias.abs_()
    feats = (torch.rand(1, 60, 16) + 0.1).requires_grad_(True)
    out, _ = frontend(feats, torch.tensor([60]))
    t = 2
    out[0, t].sum().backward()
    read = feats.grad[0].abs().sum(1).nonzero().flatten().tolist()
    first = t * frontend.stride
    assert read == list(range(first, first + frontend.stride + frontend.overlap))

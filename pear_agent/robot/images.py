"""Camera images as the model receives them: JPEG bytes (OpenCV), made where the observation is
turned into a turn, so the text protocol never loads an image codec."""

from __future__ import annotations

import cv2
import numpy as np


def encode_jpeg(image: np.ndarray, quality: int = 85) -> bytes:
    """An RGB image as JPEG bytes at `quality` (OpenCV's scale, 0-100)."""
    ok, buf = cv2.imencode(
        ".jpg", cv2.cvtColor(image, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, quality]
    )
    if not ok:
        raise ValueError("JPEG encoding failed")
    return buf.tobytes()

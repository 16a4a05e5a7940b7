"""Draw the integration's brand images (HA 2026.3+ serves them from brand/).

Run with `.venv/bin/python scripts/brand.py`; the PNGs are committed.
A house outline with a chat bubble, in HA blue, on a transparent background.
"""

from __future__ import annotations

from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

BRAND = Path(__file__).parent.parent / "custom_components/ha_personal_assistant/brand"
BLUE = (3, 169, 244, 255)
DARK_BLUE = (0, 120, 190, 255)
WHITE = (255, 255, 255, 255)


def icon(size: int, colour: tuple[int, int, int, int]) -> Image.Image:
    """Draw the square icon at ``size`` pixels."""
    image = Image.new("RGBA", (size, size), (0, 0, 0, 0))
    draw = ImageDraw.Draw(image)
    s = size / 256
    # The house: a roof and walls in one polygon.
    draw.polygon(
        [(128 * s, 16 * s), (244 * s, 116 * s), (214 * s, 116 * s),
         (214 * s, 236 * s), (42 * s, 236 * s), (42 * s, 116 * s),
         (12 * s, 116 * s)],
        fill=colour,
    )  # fmt: skip
    # The chat bubble inside, with its tail.
    draw.rounded_rectangle(
        [70 * s, 112 * s, 186 * s, 184 * s], radius=18 * s, fill=WHITE
    )
    draw.polygon([(92 * s, 180 * s), (84 * s, 212 * s), (118 * s, 182 * s)], fill=WHITE)
    for x in (100, 128, 156):
        draw.ellipse([(x - 9) * s, 139 * s, (x + 9) * s, 157 * s], fill=colour)
    return image


def logo(
    height: int, colour: tuple[int, int, int, int], text: tuple[int, ...]
) -> Image.Image:
    """Draw the wide logo: the icon and the name."""
    try:
        font = ImageFont.truetype("DejaVuSans-Bold.ttf", int(height * 0.3))
    except OSError:
        font = ImageFont.load_default(size=int(height * 0.3))
    name = "Personal Assistant"
    left, _, right, _ = font.getbbox(name)
    width = int(height * 1.15 + (right - left) + height * 0.1)
    image = Image.new("RGBA", (width, height), (0, 0, 0, 0))
    image.alpha_composite(icon(height, colour))
    ImageDraw.Draw(image).text(
        (height * 1.15, height * 0.32), name, font=font, fill=text
    )
    return image


def main() -> None:
    """Write every brand image HA looks for."""
    BRAND.mkdir(exist_ok=True)
    icon(256, BLUE).save(BRAND / "icon.png", optimize=True)
    icon(512, BLUE).save(BRAND / "icon@2x.png", optimize=True)
    logo(128, BLUE, (33, 33, 33, 255)).save(BRAND / "logo.png", optimize=True)
    logo(256, BLUE, (33, 33, 33, 255)).save(BRAND / "logo@2x.png", optimize=True)
    logo(128, DARK_BLUE, (225, 225, 225, 255)).save(
        BRAND / "dark_logo.png", optimize=True
    )
    logo(256, DARK_BLUE, (225, 225, 225, 255)).save(
        BRAND / "dark_logo@2x.png", optimize=True
    )


if __name__ == "__main__":
    main()

"""pricewatch: keep e-commerce prices, list prices and stock states fresh with Scrapy."""

__version__ = "0.1.0"

"""storlab.design"""
